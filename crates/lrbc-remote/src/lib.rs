//! A live LRBC run over the Foxglove WebSocket protocol: the protocol's names, opcodes
//! and messages (`protocol`), the server of `serve` (`server`: a thread per connection,
//! no async runtime), and the remote viewer that the window uses for a served run
//! (`view`). No window.

pub mod protocol;
pub mod server;
pub mod view;
