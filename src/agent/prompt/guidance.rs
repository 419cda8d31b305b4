//! The guidance blocks of the system prompt and when each applies. The selection follows
//! Hermes 0.19 (`agent/system_prompt.py`): the general blocks only when the agent has tools,
//! a line per tool that benefits from one (`memory`, `session_search`, `skill_manage`), the
//! "act, don't announce" block by `agent.tool_use_enforcement` and the model's family, with
//! extra notes for Gemini/Gemma and GPT/Codex/Grok, and a note about the chat platform
//! (overridable per platform in `platform_hints`). The texts are ours.

use crate::config::{HintOverride, PromptConfig, ToolUseEnforcement};

/// Model-name parts that get the enforcement block under `auto` (Hermes's list).
const ENFORCED_FAMILIES: &[&str] = &[
    "gpt", "codex", "gemini", "gemma", "grok", "glm", "qwen", "deepseek",
];

const TASK_COMPLETION: &str = "# Seeing work through\n\
When you are asked to build, run or check something, the answer is the real result your \
tools produced, not a plan, a stub or a description of what could be done. Carry on until \
the thing works or you have shown it does not.\n\
When a command, an install or a network call fails and blocks the way, tell the user what \
failed and what you tried instead. Never fill the gap with invented output, made-up data or \
a fabricated file: an honest report of the blocker is worth more than a plausible fake.";

const PARALLEL_CALLS: &str = "# Independent tool calls go together\n\
If you need several things that do not depend on one another (files to read, searches, \
lookups, read-only commands), ask for all of them in the same response: they run side by \
side and every extra round trip resends the whole conversation. Make calls one after \
another only when a later one needs an earlier one's result.";

const MEMORY_TOOL: &str = "The memory tool keeps facts between sessions and they are shown \
to you at the start of each one, so keep entries short and lasting: the user's preferences, \
corrections they had to make, facts about their setup. Progress notes, ticket numbers and \
anything stale within days do not belong there; state facts rather than orders to yourself.";

const SESSION_SEARCH_TOOL: &str = "When the user mentions an earlier conversation, or one \
probably holds what you need, look it up with session_search before asking them to repeat it.";

const SKILL_MANAGE_TOOL: &str = "Once you have worked out a procedure that took real effort \
(many tool calls, a tricky fix, a workflow worth repeating), keep it as a skill with \
skill_manage; when a skill you are following proves wrong or out of date, correct it then \
and there.";

const ENFORCEMENT: &str = "# Act rather than announce\n\
Do the work with your tools instead of saying what you are going to do. If your reply says \
you will run, open, check or create something, the matching tool call belongs in that same \
reply. Do not end a turn on a promise or a to-do list for later: each reply either moves the \
task forward with tool calls or hands over the finished result.";

const GOOGLE_FAMILY: &str = "# How to work here\n\
- Give file tools absolute paths, built from the project root.\n\
- Read a file or search the tree before changing anything; never assume what a file holds.\n\
- Check that a library is a declared dependency (Cargo.toml, package.json, \
requirements.txt, ...) before using it.\n\
- Pass non-interactive flags (-y, --yes) so commands never wait for input.\n\
- Keep explanations to a few sentences; let the actions and results speak.\n\
- Keep going until the task is finished rather than stopping at a plan.";

const OPENAI_FAMILY: &str = "# Working discipline\n\
- Reach for a tool whenever it makes the answer more correct or better grounded; an empty \
or partial result means trying another query or approach, not stopping.\n\
- Arithmetic, hashes, encodings, dates and times, the state of this machine, file contents \
and git history come from tools, never from recall. What memory says about the user's own \
computer does not describe the machine your tools run on.\n\
- When a request has an obvious reading, act on it; ask only when the ambiguity would \
change which tool you call.\n\
- Look up what an action depends on before taking it, even when the action seems obvious.\n\
- Before answering, check that every requirement is met, that claims rest on tool output \
and that the format is the one asked for; confirm the scope of anything with side effects.\n\
- If something you need is missing, retrieve it with a tool; when you must go ahead without \
it, say which assumptions you made.";

/// The guidance blocks for an agent offered `tools` and talking to `model`, in prompt order.
pub fn blocks(config: &PromptConfig, tools: &[String], model: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if tools.is_empty() {
        return out;
    }
    if config.task_completion_guidance {
        out.push(TASK_COMPLETION);
    }
    if config.parallel_tool_call_guidance {
        out.push(PARALLEL_CALLS);
    }
    let has = |name: &str| tools.iter().any(|t| t == name);
    for (tool, text) in [
        ("memory", MEMORY_TOOL),
        ("session_search", SESSION_SEARCH_TOOL),
        ("skill_manage", SKILL_MANAGE_TOOL),
    ] {
        if has(tool) {
            out.push(text);
        }
    }
    let model = model.to_lowercase();
    let enforce = match &config.tool_use_enforcement {
        ToolUseEnforcement::Always => true,
        ToolUseEnforcement::Never => false,
        ToolUseEnforcement::Models(parts) => parts.iter().any(|p| model.contains(p.as_str())),
        ToolUseEnforcement::Auto => ENFORCED_FAMILIES.iter().any(|p| model.contains(p)),
    };
    if enforce {
        out.push(ENFORCEMENT);
        if model.contains("gemini") || model.contains("gemma") {
            out.push(GOOGLE_FAMILY);
        }
        if ["gpt", "codex", "grok"].iter().any(|p| model.contains(p)) {
            out.push(OPENAI_FAMILY);
        }
    }
    out
}

/// hermesd's own note for a platform: how replies are shown there and how files go out.
fn default_hint(platform: &str) -> Option<&'static str> {
    Some(match platform {
        "telegram" => {
            "You are talking to the user in Telegram. Your Markdown (bold, italic, \
             strikethrough, inline code, code blocks, links, headings) is converted to \
             Telegram's own formatting; tables are not, so present structured data as bullet \
             lists or key: value lines. To send a file, add a tag such as \
             MEDIA:/tmp/chart.png (an absolute path) to your reply: pictures arrive as \
             photos, .ogg audio as a voice message, .mp4 as a \
             playable video."
        }
        "discord" => {
            "You are talking to the user in Discord (a server channel, a thread or a direct \
             message). Discord renders Markdown. To send a file, add a tag \
             such as MEDIA:/tmp/chart.png (an absolute path) to your reply; the file is \
             uploaded as an attachment."
        }
        "slack" => {
            "You are talking to the user in Slack. Plain Markdown is turned into Slack's \
             formatting. To send a file, add a tag such as \
             MEDIA:/tmp/chart.png (an absolute path) to your reply; the file is uploaded to \
             the conversation."
        }
        "api_server" => {
            "Your replies go to a program through an HTTP API, and nobody knows how they will \
             be displayed, so write plain text: no Markdown emphasis, bullets, headings or \
             code fences. Answer conversationally and briefly."
        }
        "cron" => {
            "You are running a scheduled job and no one is watching: you cannot ask \
             questions or wait for an answer. Do the whole task on your own judgement. Your \
             final reply is delivered to the job's destination as it is, so make the result \
             itself the reply."
        }
        "cli" => {
            "You are in a terminal session. Plain text and simple Markdown read well; keep \
             lines reasonably short."
        }
        _ => return None,
    })
}

/// The platform note after `platform_hints` has replaced or extended the default.
pub fn platform_hint(config: &PromptConfig, platform: &str) -> Option<String> {
    let key = platform.trim().to_lowercase();
    let default = default_hint(&key);
    let Some(HintOverride { replace, append }) = config.platform_hints.get(&key) else {
        return default.map(str::to_owned);
    };
    let base = replace.as_deref().or(default);
    match (base, append) {
        (Some(base), Some(extra)) => Some(format!("{base}\n\n{extra}")),
        (Some(base), None) => Some(base.to_owned()),
        (None, Some(extra)) => Some(extra.clone()),
        (None, None) => None,
    }
}

#[cfg(test)]
#[path = "guidance_tests.rs"]
mod tests;
