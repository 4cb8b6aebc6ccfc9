//! Viewing a run served by `serve` (or any server of the Foxglove WebSocket protocol):
//! the protocol's messages ([`wire`]) and a blocking connection ([`client`]).

pub mod client;
pub mod wire;

pub use client::{Connection, RemoteError};
