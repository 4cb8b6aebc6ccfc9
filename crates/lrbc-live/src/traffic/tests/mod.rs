use super::decode::MAX_PENDING;
use super::*;
use lrbc::attach::Attached;
use lrbc::layout::plan::PlanLayout;
use lrbc::rings::lucky;
use lrbc::rings::v1::V1Producer;
use lrbc::rpc::{self, fb};
use lrbc::segment::Segment;
use lrbc::testutil::{TestSegment, spec};

// Entries decoded and paired (`decoding`), the bookkeeping of requests awaiting their
// answers (`pending`), and streams and their items (`streams`).

fn request(corr: u64, sent_ns: u64) -> Vec<u8> {
    rpc::build_envelope(corr, fb::MethodId::GetJointState, None, sent_ns, |fbb| {
        let name = fbb.create_string("robot");
        let req = fb::GetJointStateReq::create(
            fbb,
            &fb::GetJointStateReqArgs {
                robot_name: Some(name),
            },
        );
        Some((fb::Payload::GetJointStateReq, req.as_union_value()))
    })
}

fn response(corr: u64, sent_ns: u64, error: Option<&str>) -> Vec<u8> {
    rpc::build_envelope(corr, fb::MethodId::GetJointState, error, sent_ns, |_| None)
}

fn records(events: &[TrafficEvent]) -> Vec<&Record> {
    events
        .iter()
        .filter_map(|e| match e {
            TrafficEvent::Record(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

/// Requests and responses through real rings, consumed as an engine and client would.
struct Exchange {
    seg: TestSegment,
    client: V1Producer,
    engine: V1Producer,
    c2s_reader: lrbc::rings::v1::V1Consumer,
    s2c_reader: lrbc::rings::v1::V1Consumer,
    buf: Vec<u8>,
}

impl Exchange {
    fn new(tag: &str) -> (Self, Attached) {
        let seg = TestSegment::create(tag, &spec(PlanLayout::Lrbc { ext: true }, 2));
        let a = seg.attach();
        let c2s = *a.geometry.ring(RegionKind::CmdC2s).unwrap();
        let s2c = *a.geometry.ring(RegionKind::CmdS2c).unwrap();
        let x = Self {
            client: V1Producer::new(&seg.rw, c2s),
            engine: V1Producer::new(&seg.rw, s2c),
            c2s_reader: lrbc::rings::v1::V1Consumer::new(&seg.rw, c2s),
            s2c_reader: lrbc::rings::v1::V1Consumer::new(&seg.rw, s2c),
            seg,
            buf: Vec::new(),
        };
        (x, a)
    }

    /// One request (and its response, if any), read by the tap, then consumed.
    fn step(
        &mut self,
        t: &mut Traffic,
        mem: &Segment,
        request: &[u8],
        response: Option<&[u8]>,
        now_ns: u64,
        out: &mut Vec<TrafficEvent>,
    ) {
        self.client.try_push(&self.seg.rw, request).unwrap();
        if let Some(r) = response {
            self.engine.try_push(&self.seg.rw, r).unwrap();
        }
        t.poll(mem, now_ns, usize::MAX, out);
        self.consume();
    }

    /// The engine and client take everything published.
    fn consume(&mut self) {
        while self
            .c2s_reader
            .try_pop(&self.seg.rw, &mut self.buf)
            .unwrap()
            .is_some()
        {}
        while self
            .s2c_reader
            .try_pop(&self.seg.rw, &mut self.buf)
            .unwrap()
            .is_some()
        {}
    }
}

mod decoding;
mod pending;
mod streams;
