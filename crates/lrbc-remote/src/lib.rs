//! A live LRBC run over the Foxglove WebSocket protocol: `serve` and the window's remote
//! viewer. No window.
//!
//! Modules, each using only those above it:
//! - `protocol`: the protocol's names, opcodes, messages and streams
//! - `summary`: a frame's summary, the JSON message of `serve`'s summary channel
//! - `server`: the server of `serve`: a thread per connection, paced outboxes, control services
//! - `view`: viewing a served run: the connection, the viewer thread, the link's figures

pub mod protocol;
pub mod server;
pub mod summary;
pub mod view;
