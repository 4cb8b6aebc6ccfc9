//! What the numbers of the header mean: its enumerations and flag words in words (spec
//! sections 2, 2.1, 7 and 8), for the header tables of the window and of `dump`. The
//! service names come from the schema (`services`).

use super::services;
use crate::layout::LRBC_MAGIC;

/// The meaning of a header field's value, for the fields that are enumerations or flag
/// words (by their names in the spec); `None` for the fields that are plain numbers. A
/// value the spec does not define reads "unknown", a set bit of `service_flags` that no
/// service has reads "bit N".
pub fn describe(field: &str, value: u64) -> Option<String> {
    let one_of = |names: &[&str]| {
        usize::try_from(value)
            .ok()
            .and_then(|i| names.get(i).copied())
            .unwrap_or("unknown")
            .to_string()
    };
    Some(match field {
        "magic" if value == u64::from(LRBC_MAGIC) => "LRBC".into(),
        "magic" => "unknown".into(),
        "mode" => one_of(&["training", "inference"]),
        "gpu_available" => one_of(&["no", "yes"]),
        "gpu_obs_mode" => one_of(&["CPU", "CUDA_IPC", "VULKAN_EXTERNAL"]),
        "service_flags" => {
            u32::try_from(value).map_or_else(|_| "unknown".into(), services::flags_text)
        }
        // The luckyrobots layout's handshake words.
        "engine_ready" | "client_ready" => one_of(&["no", "yes"]),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enumerations_read_as_their_names_in_the_spec() {
        let d = |field, value| describe(field, value).unwrap_or_default();
        assert_eq!(d("magic", 0x4C52_4243), "LRBC");
        assert_eq!(d("mode", 0), "training");
        assert_eq!(d("mode", 1), "inference");
        assert_eq!(d("gpu_available", 0), "no");
        assert_eq!(d("gpu_available", 1), "yes");
        assert_eq!(d("gpu_obs_mode", 0), "CPU");
        assert_eq!(d("gpu_obs_mode", 1), "CUDA_IPC");
        assert_eq!(d("gpu_obs_mode", 2), "VULKAN_EXTERNAL");
        assert_eq!(d("engine_ready", 1), "yes");
        assert_eq!(d("client_ready", 0), "no");
    }

    #[test]
    fn values_the_spec_does_not_define_read_unknown() {
        let d = |field, value| describe(field, value).unwrap_or_default();
        assert_eq!(d("magic", 0xDEAD_BEEF), "unknown");
        assert_eq!(d("mode", 7), "unknown");
        assert_eq!(d("gpu_available", 2), "unknown");
        assert_eq!(d("gpu_obs_mode", 3), "unknown");
        assert_eq!(d("gpu_obs_mode", u64::MAX), "unknown");
        assert_eq!(
            d("service_flags", 1 << 40),
            "unknown",
            "wider than the word"
        );
    }

    #[test]
    fn service_flags_name_the_schema_services_and_unknown_bits_by_number() {
        let d = |value| describe("service_flags", value).unwrap_or_default();
        assert_eq!(
            d(0x7f),
            "Agent Mujoco Telemetry Scene Camera Viewport Debug"
        );
        assert_eq!(
            d(0x7f & !(1 << 4)),
            "Agent Mujoco Telemetry Scene Viewport Debug"
        );
        assert_eq!(d(0), "none");
        assert_eq!(d((1 << 9) | (1 << 2)), "Telemetry bit 9");
        assert_eq!(d(1 << 31), "bit 31");
    }

    #[test]
    fn plain_numbers_have_no_description() {
        for field in [
            "num_envs",
            "frame_seq",
            "version",
            "gpu_device_id",
            "obs_offset",
        ] {
            assert_eq!(describe(field, 1), None, "{field}");
        }
    }

    #[test]
    fn service_names_come_from_the_schema_enum_in_bit_order() {
        let names: Vec<&str> = services::ids().filter_map(services::name).collect();
        assert_eq!(names.len(), services::COUNT);
        assert_eq!(
            names,
            [
                "Agent",
                "Mujoco",
                "Telemetry",
                "Scene",
                "Camera",
                "Viewport",
                "Debug"
            ]
        );
        let ids: Vec<u8> = services::ids().collect();
        assert_eq!(ids, (0..7).collect::<Vec<u8>>(), "ids are the bits 0..7");
        assert_eq!(services::id_of("MUJOCO"), Some(1));
        assert_eq!(services::id_of("debug"), Some(6));
        assert_eq!(services::id_of("lidar"), None);
        assert_eq!(services::name(7), None);
        assert_eq!(services::label(7), "unknown");
        assert_eq!(services::id_of("MuJoCo"), Some(1));
        assert_eq!(services::id_of("CAMERA"), Some(4));
        assert_eq!(
            services::choices(),
            "agent, mujoco, telemetry, scene, camera, viewport, debug"
        );
    }
}
