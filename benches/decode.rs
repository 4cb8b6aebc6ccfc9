//! Envelopes verified and decoded into field trees, on one core.
//!
//! `cargo bench --bench decode`; figures in docs/benchmarks.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lrbc::rpc;
use lrbc_sim::bench::sample_envelopes;

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(1));
    for (name, bytes) in sample_envelopes() {
        // The sample must decode, or the figure would time an error path.
        let nodes = match rpc::decode_envelope(&bytes) {
            Ok(d) => d.tree.nodes.len(),
            Err(e) => panic!("sample {name} does not decode: {e}"),
        };
        let id = format!("{name} ({} bytes, {nodes} nodes)", bytes.len());
        group.bench_function(id, |b| {
            b.iter(|| {
                rpc::decode_envelope(std::hint::black_box(&bytes)).map(|d| d.tree.nodes.len())
            });
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
