//! The header tables of the spec (`lrbc-v1.md` sections 2, 2.1, 4 and 8) as wire structs.
//! Offsets are written next to each field and checked at compile time.

use core::mem::offset_of;

use super::fields::wire_struct;
use zerocopy::little_endian::{I64, U32, U64};

/// `0x4C524243`, "LRBC" read as a little-endian u32.
pub const LRBC_MAGIC: u32 = 0x4C52_4243;
/// The only version this tool understands.
pub const LRBC_VERSION: u32 = 1;
/// Both layouts reserve the first 4096 bytes for the header.
pub const HEADER_REGION_BYTES: u64 = 4096;
/// Where the LRBC extension block (spec 2.1) starts and ends.
pub const EXT_BLOCK_START: usize = 256;
pub const EXT_BLOCK_END: usize = 512;

wire_struct! {
    /// The LRBC v1 header: the seed's fields (bytes 0..256) and the extension block
    /// (bytes 256..512). Bytes 512..4096 are reserved.
    pub struct LrbcHeader (size 512) {
        0 magic: U32 = Magic; "0x4C524243 (\"LRBC\")"
        4 version: U32 = U32; "1"
        8 server_pid: U32 = U32; "engine process id"
        12 client_pid: U32 = U32; "client process id; 0 while none is attached"
        16 mode: u8 = U8; "0 = Training (lock-step), 1 = Inference (free-running)"
        17 _pad17: [u8; 3] = Reserved; "padding, zero"
        20 num_envs: U32 = U32; "number of environments"
        24 obs_size: U32 = U32; "f32 observations per env"
        28 act_size: U32 = U32; "f32 actions per env"
        32 frame_seq: U64 = U64, atomic; "incremented once after all obs/rewards/dones of a step"
        40 action_seq: U64 = U64, atomic; "incremented once after all actions and reset flags"
        48 obs_offset: U64 = U64; "f32[num_envs * obs_size]"
        56 act_offset: U64 = U64; "f32[num_envs * act_size]"
        64 rewards_offset: U64 = U64; "f32[num_envs]"
        72 dones_offset: U64 = U64; "u8[num_envs]"
        80 resets_offset: U64 = U64; "u8[num_envs], client writes 1 = reset this env"
        88 cmd_s2c_offset: U64 = U64; "server-to-client command ring"
        96 cmd_c2s_offset: U64 = U64; "client-to-server command ring"
        104 cmd_ring_size: U32 = U32; "data capacity of each command ring, a power of two"
        108 _pad108: [u8; 4] = Reserved; "padding, zero"
        112 image_offset: U64 = U64; "image region, 0 if none"
        120 image_width: U32 = U32; "pixels"
        124 image_height: U32 = U32; "pixels"
        128 image_channels: U32 = U32; "1, 3 or 4"
        132 gpu_available: u8 = U8; "1 if GPU buffers are exported"
        133 gpu_obs_mode: u8 = U8; "0 = CPU, 1 = CUDA_IPC, 2 = VULKAN_EXTERNAL"
        134 gpu_obs_handle: [u8; 64] = Blob; "e.g. cudaIpcMemHandle_t"
        198 _pad198: [u8; 2] = Reserved; "padding, zero"
        200 gpu_device_id: U32 = U32; "CUDA device ordinal"
        204 _reserved204: [u8; 52] = Reserved; "reserved, zero"
        256 total_size: U64 = U64; "size of the segment in bytes"
        264 truncateds_offset: U64 = U64; "u8[num_envs]"
        272 names_offset: U64 = U64; "observation and action names, 0 if none"
        280 names_size: U32 = U32; "bytes in the names region"
        284 service_flags: U32 = U32, atomic; "bit i set = service i enabled"
        288 write_seq: U64 = U64, atomic; "seqlock: odd while the engine writes, even after"
        296 image_seq: U64 = U64, atomic; "incremented after each complete image write"
        304 frame_time_ns: U64 = U64, atomic; "CLOCK_MONOTONIC when frame_seq was last incremented"
        312 action_time_ns: U64 = U64, atomic; "CLOCK_MONOTONIC when action_seq was last incremented"
        320 ctl_s2c_offset: U64 = U64; "tool control ring, engine to tool; 0 if none"
        328 ctl_c2s_offset: U64 = U64; "tool control ring, tool to engine"
        336 ctl_ring_size: U32 = U32; "data capacity of each control ring, a power of two"
        340 _reserved340: [u8; 172] = Reserved; "reserved, zero"
    }
}

wire_struct! {
    /// The first eight bytes, the same in both layouts: what says a segment is LRBC at
    /// all. An engine stores them last, as one word, when the rest of the segment is
    /// complete.
    pub struct Preamble (size 8) {
        0 magic: U32 = Magic; "0x4C524243 (\"LRBC\")"
        4 version: U32 = U32; "1"
    }
}

impl Preamble {
    /// Where the preamble sits: the start of the segment.
    pub const OFFSET: u64 = offset_of!(LrbcHeader, magic) as u64;
}

const _: () = {
    assert!(offset_of!(Preamble, magic) == offset_of!(LrbcHeader, magic));
    assert!(offset_of!(Preamble, version) == offset_of!(LrbcHeader, version));
    assert!(offset_of!(Preamble, magic) == offset_of!(LuckyHeader, magic));
    assert!(offset_of!(Preamble, version) == offset_of!(LuckyHeader, version));
    assert!(Preamble::OFFSET == 0 && Preamble::SIZE_BYTES == 8);
};

/// Byte offsets of the words that are loaded and stored atomically in the segment.
impl LrbcHeader {
    pub const FRAME_SEQ_OFFSET: u64 = offset_of!(Self, frame_seq) as u64;
    pub const ACTION_SEQ_OFFSET: u64 = offset_of!(Self, action_seq) as u64;
    pub const SERVICE_FLAGS_OFFSET: u64 = offset_of!(Self, service_flags) as u64;
    pub const WRITE_SEQ_OFFSET: u64 = offset_of!(Self, write_seq) as u64;
    pub const IMAGE_SEQ_OFFSET: u64 = offset_of!(Self, image_seq) as u64;
    pub const FRAME_TIME_NS_OFFSET: u64 = offset_of!(Self, frame_time_ns) as u64;
    pub const ACTION_TIME_NS_OFFSET: u64 = offset_of!(Self, action_time_ns) as u64;
}

wire_struct! {
    /// The luckyrobots IPC header (spec section 8). The struct is 4096 bytes on the
    /// wire; bytes 128..4096 are unused.
    pub struct LuckyHeader (size 128) {
        0 magic: U32 = Magic; "0x4C524243 (\"LRBC\")"
        4 version: U32 = U32; "1"
        8 engine_pid: U32 = U32; "engine process id"
        12 client_pid: U32 = U32; "client process id; 0 while none is attached"
        16 num_envs: U32 = U32; "number of environments"
        20 obs_size: U32 = U32; "f32 observations per env"
        24 act_size: U32 = U32; "f32 actions per env"
        28 reserved: U32 = Reserved; "reserved"
        32 frame_seq: I64 = I64, atomic; "the engine stores action_seq here after each step"
        40 action_seq: I64 = I64, atomic; "incremented by the client once per step"
        48 obs_offset: U64 = U64; "f32[num_envs * obs_size]"
        56 act_offset: U64 = U64; "f32[num_envs * act_size]"
        64 reward_offset: U64 = U64; "f32[num_envs]"
        72 done_offset: U64 = U64; "u8[num_envs]"
        80 reset_offset: U64 = U64; "u8[num_envs]"
        88 schema_offset: U64 = U64; "observation and action names (section 6 format), up to 64 KiB"
        96 cmd_in_offset: U64 = U64; "client-to-engine ring"
        104 cmd_out_offset: U64 = U64; "engine-to-client ring"
        112 total_size: U64 = U64; "size of the segment in bytes"
        120 engine_ready: U32 = U32, atomic; "1 once the engine has initialised the segment"
        124 client_ready: U32 = U32, atomic; "1 while a client is attached"
    }
}

/// Byte offsets of the words that are loaded and stored atomically in the segment.
impl LuckyHeader {
    pub const FRAME_SEQ_OFFSET: u64 = offset_of!(Self, frame_seq) as u64;
    pub const ACTION_SEQ_OFFSET: u64 = offset_of!(Self, action_seq) as u64;
    pub const ENGINE_READY_OFFSET: u64 = offset_of!(Self, engine_ready) as u64;
    pub const CLIENT_READY_OFFSET: u64 = offset_of!(Self, client_ready) as u64;
}

/// The names region of the luckyrobots layout has no size field; it is at most this long.
pub const LUCKY_SCHEMA_MAX_BYTES: u64 = 64 * 1024;

wire_struct! {
    /// The 64-byte header in front of each LRBC command or control ring (spec 4).
    pub struct RingHeader (size 64) {
        0 write_pos: U32 = U32, atomic; "producer's free-running byte counter"
        4 read_pos: U32 = U32, atomic; "consumer's free-running byte counter"
        8 owner_pid: U32 = U32, atomic; "ctl_c2s only: the control lease"
        12 _reserved12: [u8; 52] = Reserved; "reserved, zero"
    }
}

wire_struct! {
    /// The 192-byte header in front of each luckyrobots ring (spec 8).
    pub struct LuckyRingHeader (size 192) {
        0 head: U64 = U64, atomic; "producer's free-running byte counter"
        8 _pad8: [u8; 56] = Reserved; "cache-line padding"
        64 tail: U64 = U64, atomic; "consumer's free-running byte counter"
        72 _pad72: [u8; 56] = Reserved; "cache-line padding"
        128 capacity: U32 = U32; "data bytes, a power of two; 0 means 512 KiB"
        132 _pad132: [u8; 60] = Reserved; "padding"
    }
}

/// Byte offsets (from the start of the ring) of the ring header's atomic words.
impl RingHeader {
    pub const WRITE_POS_OFFSET: u64 = offset_of!(Self, write_pos) as u64;
    pub const READ_POS_OFFSET: u64 = offset_of!(Self, read_pos) as u64;
    pub const OWNER_PID_OFFSET: u64 = offset_of!(Self, owner_pid) as u64;
}

/// Byte offsets (from the start of the ring) of the ring header's atomic words.
impl LuckyRingHeader {
    pub const HEAD_OFFSET: u64 = offset_of!(Self, head) as u64;
    pub const TAIL_OFFSET: u64 = offset_of!(Self, tail) as u64;
}

/// When a luckyrobots ring's capacity word reads 0, the client assumes a 512 KiB ring
/// *region* (spec 8): header included, so the data capacity is the largest power of two
/// that fits in `512 KiB - 192`, which is 256 KiB. This is what the luckyrobots client
/// computes; the tool does the same so both see the same ring.
pub const LUCKY_DEFAULT_RING_REGION_BYTES: u32 = 512 * 1024;
pub const LUCKY_DEFAULT_RING_CAPACITY: u32 = {
    let room = LUCKY_DEFAULT_RING_REGION_BYTES - LuckyRingHeader::SIZE_BYTES as u32;
    1 << (31 - room.leading_zeros())
};
const _: () = assert!(LUCKY_DEFAULT_RING_CAPACITY == 256 * 1024);

/// Byte offsets of the live words a tool polls, for whichever layout is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterOffsets {
    pub server_pid: u64,
    pub client_pid: u64,
    pub frame_seq: u64,
    pub action_seq: u64,
    /// Present with the LRBC extension block only.
    pub ext: Option<ExtCounterOffsets>,
}

/// The extension block's live words (spec 2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtCounterOffsets {
    pub service_flags: u64,
    pub write_seq: u64,
    pub image_seq: u64,
    pub frame_time_ns: u64,
    pub action_time_ns: u64,
}

impl CounterOffsets {
    pub const LRBC_SEED: Self = Self {
        server_pid: offset_of!(LrbcHeader, server_pid) as u64,
        client_pid: offset_of!(LrbcHeader, client_pid) as u64,
        frame_seq: LrbcHeader::FRAME_SEQ_OFFSET,
        action_seq: LrbcHeader::ACTION_SEQ_OFFSET,
        ext: None,
    };
    pub const LRBC_EXT: Self = Self {
        ext: Some(ExtCounterOffsets {
            service_flags: LrbcHeader::SERVICE_FLAGS_OFFSET,
            write_seq: LrbcHeader::WRITE_SEQ_OFFSET,
            image_seq: LrbcHeader::IMAGE_SEQ_OFFSET,
            frame_time_ns: LrbcHeader::FRAME_TIME_NS_OFFSET,
            action_time_ns: LrbcHeader::ACTION_TIME_NS_OFFSET,
        }),
        ..Self::LRBC_SEED
    };
    pub const LUCKY: Self = Self {
        server_pid: offset_of!(LuckyHeader, engine_pid) as u64,
        client_pid: offset_of!(LuckyHeader, client_pid) as u64,
        frame_seq: LuckyHeader::FRAME_SEQ_OFFSET,
        action_seq: LuckyHeader::ACTION_SEQ_OFFSET,
        ext: None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_tables_cover_every_byte_without_gaps() {
        for (fields, size) in [
            (LrbcHeader::FIELDS, LrbcHeader::SIZE_BYTES),
            (LuckyHeader::FIELDS, LuckyHeader::SIZE_BYTES),
            (RingHeader::FIELDS, RingHeader::SIZE_BYTES),
            (LuckyRingHeader::FIELDS, LuckyRingHeader::SIZE_BYTES),
        ] {
            let mut next = 0;
            for f in fields {
                assert_eq!(f.offset_bytes, next, "gap or overlap before {}", f.name);
                next += f.size_bytes;
            }
            assert_eq!(next, size);
        }
    }

    #[test]
    fn atomic_fields_are_naturally_aligned() {
        for f in LrbcHeader::FIELDS
            .iter()
            .chain(LuckyHeader::FIELDS)
            .chain(RingHeader::FIELDS)
            .chain(LuckyRingHeader::FIELDS)
            .filter(|f| f.atomic)
        {
            assert_eq!(f.offset_bytes % f.size_bytes, 0, "{} is misaligned", f.name);
        }
    }

    #[test]
    fn the_offset_constants_name_the_atomic_fields_of_the_tables() {
        let check = |fields: &[crate::layout::FieldSpec], consts: &[(u64, &str)]| {
            for (offset, name) in consts {
                let f = fields.iter().find(|f| f.name == *name);
                assert_eq!(f.map(|f| f.offset_bytes as u64), Some(*offset), "{name}");
                assert!(f.is_some_and(|f| f.atomic), "{name} is not atomic");
            }
            let atomic = fields.iter().filter(|f| f.atomic).count();
            assert_eq!(
                atomic,
                consts.len(),
                "an atomic field has no offset constant"
            );
        };
        check(
            LrbcHeader::FIELDS,
            &[
                (LrbcHeader::FRAME_SEQ_OFFSET, "frame_seq"),
                (LrbcHeader::ACTION_SEQ_OFFSET, "action_seq"),
                (LrbcHeader::SERVICE_FLAGS_OFFSET, "service_flags"),
                (LrbcHeader::WRITE_SEQ_OFFSET, "write_seq"),
                (LrbcHeader::IMAGE_SEQ_OFFSET, "image_seq"),
                (LrbcHeader::FRAME_TIME_NS_OFFSET, "frame_time_ns"),
                (LrbcHeader::ACTION_TIME_NS_OFFSET, "action_time_ns"),
            ],
        );
        check(
            LuckyHeader::FIELDS,
            &[
                (LuckyHeader::FRAME_SEQ_OFFSET, "frame_seq"),
                (LuckyHeader::ACTION_SEQ_OFFSET, "action_seq"),
                (LuckyHeader::ENGINE_READY_OFFSET, "engine_ready"),
                (LuckyHeader::CLIENT_READY_OFFSET, "client_ready"),
            ],
        );
        check(
            RingHeader::FIELDS,
            &[
                (RingHeader::WRITE_POS_OFFSET, "write_pos"),
                (RingHeader::READ_POS_OFFSET, "read_pos"),
                (RingHeader::OWNER_PID_OFFSET, "owner_pid"),
            ],
        );
        check(
            LuckyRingHeader::FIELDS,
            &[
                (LuckyRingHeader::HEAD_OFFSET, "head"),
                (LuckyRingHeader::TAIL_OFFSET, "tail"),
            ],
        );
    }

    #[test]
    fn the_ring_modules_address_the_same_words_as_the_ring_headers() {
        use crate::rings::{lucky, v1};
        assert_eq!(v1::WRITE_POS, RingHeader::WRITE_POS_OFFSET);
        assert_eq!(v1::READ_POS, RingHeader::READ_POS_OFFSET);
        assert_eq!(v1::OWNER_PID, RingHeader::OWNER_PID_OFFSET);
        assert_eq!(v1::DATA, RingHeader::SIZE_BYTES as u64);
        assert_eq!(lucky::HEAD, LuckyRingHeader::HEAD_OFFSET);
        assert_eq!(lucky::TAIL, LuckyRingHeader::TAIL_OFFSET);
        assert_eq!(
            lucky::CAPACITY,
            offset_of!(LuckyRingHeader, capacity) as u64
        );
        assert_eq!(lucky::DATA, LuckyRingHeader::SIZE_BYTES as u64);
    }

    #[test]
    fn a_header_read_from_bytes_writes_back_the_same_bytes() {
        use zerocopy::{FromBytes, IntoBytes};
        let bytes: Vec<u8> = (0..LrbcHeader::SIZE_BYTES + 8).map(|i| i as u8).collect();
        let (h, rest) = LrbcHeader::read_from_prefix(&bytes).unwrap();
        assert_eq!(rest.len(), 8);
        assert_eq!(h.as_bytes(), &bytes[..LrbcHeader::SIZE_BYTES]);
        // Little-endian at the offset the table gives.
        assert_eq!(h.magic.get(), u32::from_le_bytes([0, 1, 2, 3]));
        assert_eq!(h.mode, 16);
        assert_eq!(
            h.write_seq.get(),
            u64::from_le_bytes([32, 33, 34, 35, 36, 37, 38, 39])
        );
        assert!(LuckyHeader::read_from_prefix(&bytes[..LuckyHeader::SIZE_BYTES - 1]).is_err());
    }

    #[test]
    fn spec_table_offsets_for_named_fields() {
        let at = |name: &str| {
            LrbcHeader::FIELDS
                .iter()
                .find(|f| f.name == name)
                .map(|f| (f.offset_bytes, f.size_bytes))
        };
        assert_eq!(at("frame_seq"), Some((32, 8)));
        assert_eq!(at("cmd_ring_size"), Some((104, 4)));
        assert_eq!(at("gpu_obs_handle"), Some((134, 64)));
        assert_eq!(at("gpu_device_id"), Some((200, 4)));
        assert_eq!(at("service_flags"), Some((284, 4)));
        assert_eq!(at("ctl_ring_size"), Some((336, 4)));
        assert_eq!(CounterOffsets::LRBC_EXT.ext.map(|e| e.write_seq), Some(288));
        assert_eq!(CounterOffsets::LUCKY.server_pid, 8);
    }
}
