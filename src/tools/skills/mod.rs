//! The skills tools (Hermes toolset `skills`): `skills_list` and `skill_view` load the
//! index and a skill's body or linked files on demand (progressive disclosure: the prompt
//! carries only names and one line each), `skill_manage` lets the agent create, edit, patch
//! and delete skills in the home under Hermes's safety rules (`manage.rs`).

mod edit_error;
mod guard;
mod limits;
mod manage;
mod view;

use serde_json::{Value, json};

use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, handler};
use crate::skills::{Skill, enabled};

pub use limits::{MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_SKILL_CHARS, MAX_SUPPORT_FILE_BYTES};

/// The skills this call may see: those enabled on the session's platform.
fn visible(ctx: &ToolCtx) -> Vec<Skill> {
    enabled(&ctx.home, &ctx.skills, &ctx.env, ctx.platform.as_deref())
}

fn fail(message: impl Into<String>) -> String {
    json!({"success": false, "error": message.into()}).to_string()
}

pub fn entries() -> Vec<ToolEntry> {
    vec![
        ToolEntry::new(
            "skills_list",
            "skills",
            json!({
                "description": "List the skills saved in this Hermes home (name, description, category). Load one with skill_view(name).",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "category": {"type": "string", "description": "Only list skills of this category"}
                    },
                    "required": []
                }
            }),
            handler(|ctx: ToolCtx, args: Value| async move {
                Ok::<_, ToolError>(view::list(&ctx, args["category"].as_str()))
            }),
        )
        .with_emoji("📚"),
        ToolEntry::new(
            "skill_view",
            "skills",
            json!({
                "description": "Load a skill: its SKILL.md instructions and the list of files it links (references/, templates/, scripts/, assets/). Call again with file_path to read one of those files.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The skill's name (see skills_list), or its category/name path"},
                        "file_path": {"type": "string", "description": "A file listed in linked_files, such as 'templates/report.md'; leave out for SKILL.md"}
                    },
                    "required": ["name"]
                }
            }),
            handler(|ctx: ToolCtx, args: Value| async move {
                let name = args["name"].as_str().unwrap_or_default();
                Ok::<_, ToolError>(view::view(&ctx, name, args["file_path"].as_str()))
            }),
        )
        .with_emoji("📚"),
        manage::entry(),
    ]
}
