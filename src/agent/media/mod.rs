//! Images for a model's eyes, wherever they come from (a chat photo, an MCP tool's result):
//! preparing the bytes within the APIs' limits ([`image`]) and deciding whether the model
//! sees them or gets a description ([`vision`]). It lives with the agent so both the
//! gateway's inbound media and the agent's tool rounds reach it downward.

pub mod image;
pub mod vision;
