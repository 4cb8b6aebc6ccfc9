//! A recording's loop rhythm: on [`super::RHYTHM_TOPIC`] the recorder's
//! [`RhythmSummary`] as JSON (schema [`RHYTHM_JSON_SCHEMA`]) when a pause ends, at most
//! once a second otherwise, and when the recording ends; a reader keeps the newest.

use lrbc_live::rhythm::RhythmSummary;

/// The JSON schema of `/lrbc/rhythm` (Foxglove plots its shares and figures).
pub const RHYTHM_JSON_SCHEMA: &str = r#"{
  "title": "lrbc.Rhythm",
  "description": "The loop's rhythm as the inspector learned it: rollouts and updates, which side waits, the shares of wall time, the endings of envs in step, the newest pauses",
  "type": "object",
  "properties": {
    "kind": {"type": "string", "enum": ["learning", "continuous", "periodic", "off"]},
    "step_secs": {"type": ["number", "null"], "description": "The median time between frames while stepping"},
    "rollout_frames": {"type": ["integer", "null"], "description": "Frames stepped between two pauses of the loop"},
    "update_secs": {"type": ["number", "null"], "description": "The loop's usual pause"},
    "update_side": {"type": ["string", "null"], "enum": ["trainer", "engine", "unknown", null]},
    "followed_secs": {"type": "number"},
    "stepping_secs": {"type": "number"},
    "trainer_secs": {"type": "number", "description": "Waiting for the trainer's actions"},
    "engine_secs": {"type": "number", "description": "Waiting for the engine's frame"},
    "unknown_secs": {"type": "number", "description": "Waiting on a side not known"},
    "pauses": {"type": "integer", "minimum": 0},
    "stalls": {"type": "integer", "minimum": 0},
    "time_limits": {"type": "integer", "minimum": 0, "description": "Frames whose truncations were the time limit of envs in step"},
    "time_limit_frames": {"type": ["integer", "null"]},
    "resets_in_step": {"type": "integer", "minimum": 0},
    "recent": {"type": "array", "items": {"type": "object", "properties": {
      "frame": {"type": "integer"}, "start_ns": {"type": "integer"}, "secs": {"type": ["number", "null"]},
      "trainer_secs": {"type": "number"}, "engine_secs": {"type": "number"}, "unknown_secs": {"type": "number"},
      "side": {"type": "string"}, "after_frames": {"type": ["integer", "null"]},
      "verdict": {"type": "string", "enum": ["loop", "learning", "stall", "short", "unplaced"]}}}}
  },
  "required": ["kind"]
}"#;

/// The summary's message on `/lrbc/rhythm`.
pub fn rhythm_json(r: &RhythmSummary) -> String {
    r.to_json().to_string()
}

/// A summary of `/lrbc/rhythm`; None when the message is not one.
pub fn rhythm_of(json: &[u8]) -> Option<RhythmSummary> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    RhythmSummary::from_json(&v)
}
