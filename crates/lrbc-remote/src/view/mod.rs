//! Viewing a run served by `serve` (or any server of the Foxglove WebSocket protocol):
//! the protocol's messages ([`wire`]), a blocking connection ([`client`]), the served
//! messages into the panels' data ([`feed`]), and the window's live view of a served run
//! ([`viewer`]: a thread feeding the panels' data).

pub mod client;
pub mod feed;
mod link;
mod tap;
pub mod viewer;
pub mod wire;

pub use client::{Connection, RemoteError};
pub use link::{Link, LinkState};
pub use tap::Tap;
pub use viewer::Viewer;
