//! The static toolset table (Python `TOOLSETS` and `_LEGACY_TOOLSET_MAP`), listing only
//! the tools hermesd implements.

/// A named group of tools, possibly including other toolsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toolset {
    pub name: &'static str,
    pub tools: &'static [&'static str],
    pub includes: &'static [&'static str],
    /// Posture toolsets re-list core tools without owning them (see `tools::toolsets::resolve_toolsets`).
    pub posture: bool,
}

/// The tools every CLI and messaging preset shares (`_HERMES_CORE_TOOLS`, ours only).
pub const HERMES_CORE_TOOLS: &[&str] = &[
    "terminal",
    "process",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "todo",
    "memory",
    "session_search",
    "clarify",
    "delegate_task",
    "skills_list",
    "skill_view",
    "skill_manage",
    "cronjob",
    "web_search",
    "web_extract",
    "text_to_speech",
];

/// The API server preset: everything but interactive UI tools such as clarify.
const API_SERVER_TOOLS: &[&str] = &[
    "terminal",
    "process",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "todo",
    "memory",
    "session_search",
    "delegate_task",
    "skills_list",
    "skill_view",
    "skill_manage",
    "web_search",
    "web_extract",
];

/// Webhook events may carry untrusted third-party text: no file or shell access.
const WEBHOOK_SAFE_TOOLS: &[&str] = &["clarify"];

const FILE_TOOLS: &[&str] = &["read_file", "write_file", "patch", "search_files"];

const fn set(name: &'static str, tools: &'static [&'static str]) -> Toolset {
    Toolset {
        name,
        tools,
        includes: &[],
        posture: false,
    }
}

const fn preset(name: &'static str) -> Toolset {
    set(name, HERMES_CORE_TOOLS)
}

/// The static toolset table, in the Python order. Only names and members: nothing shows a
/// toolset's description, so none is kept.
pub const TOOLSETS: &[Toolset] = &[
    set("web", &["web_search", "web_extract"]),
    set("search", &["web_search"]),
    set("x_search", &[]),
    set("vision", &[]),
    set("video", &[]),
    set("image_gen", &[]),
    set("video_gen", &[]),
    set("computer_use", &[]),
    set("terminal", &["terminal", "process"]),
    set("skills", &["skills_list", "skill_view", "skill_manage"]),
    set("browser", &[]),
    set("cronjob", &["cronjob"]),
    set("file", FILE_TOOLS),
    set("tts", &["text_to_speech"]),
    set("todo", &["todo"]),
    set("memory", &["memory"]),
    set("context_engine", &[]),
    set("session_search", &["session_search"]),
    set("project", &[]),
    set("clarify", &["clarify"]),
    set("code_execution", &[]),
    set("delegation", &["delegate_task"]),
    set("homeassistant", &[]),
    set("kanban", &[]),
    set("discord", &[]),
    set("discord_admin", &[]),
    set("yuanbao", &[]),
    set("feishu_doc", &[]),
    set("feishu_drive", &[]),
    set("spotify", &[]),
    Toolset {
        name: "debugging",
        tools: &["terminal", "process"],
        includes: &["web", "file"],
        posture: false,
    },
    Toolset {
        name: "safe",
        tools: &[],
        includes: &["web", "vision", "image_gen"],
        posture: false,
    },
    Toolset {
        name: "coding",
        tools: HERMES_CORE_TOOLS,
        includes: &[],
        posture: true,
    },
    set("hermes-acp", API_SERVER_TOOLS),
    set("hermes-api-server", API_SERVER_TOOLS),
    preset("hermes-cli"),
    preset("hermes-cron"),
    preset("hermes-telegram"),
    preset("hermes-discord"),
    preset("hermes-whatsapp"),
    preset("hermes-slack"),
    preset("hermes-signal"),
    preset("hermes-bluebubbles"),
    preset("hermes-homeassistant"),
    preset("hermes-email"),
    preset("hermes-mattermost"),
    preset("hermes-matrix"),
    preset("hermes-dingtalk"),
    preset("hermes-feishu"),
    preset("hermes-weixin"),
    preset("hermes-qqbot"),
    preset("hermes-wecom"),
    preset("hermes-wecom-callback"),
    preset("hermes-yuanbao"),
    preset("hermes-sms"),
    set("hermes-webhook", WEBHOOK_SAFE_TOOLS),
    Toolset {
        name: "hermes-gateway",
        tools: &[],
        includes: &[
            "hermes-telegram",
            "hermes-discord",
            "hermes-whatsapp",
            "hermes-slack",
            "hermes-signal",
            "hermes-bluebubbles",
            "hermes-homeassistant",
            "hermes-email",
            "hermes-sms",
            "hermes-mattermost",
            "hermes-matrix",
            "hermes-dingtalk",
            "hermes-feishu",
            "hermes-wecom",
            "hermes-wecom-callback",
            "hermes-weixin",
            "hermes-qqbot",
            "hermes-webhook",
            "hermes-yuanbao",
        ],
        posture: false,
    },
];

/// Old `*_tools` names and the tools they stood for (`_LEGACY_TOOLSET_MAP`, ours only).
pub const LEGACY_TOOLSETS: &[(&str, &[&str])] = &[
    ("web_tools", &[]),
    ("terminal_tools", &["terminal"]),
    ("vision_tools", &[]),
    ("image_tools", &[]),
    (
        "skills_tools",
        &["skills_list", "skill_view", "skill_manage"],
    ),
    ("browser_tools", &[]),
    ("cronjob_tools", &[]),
    ("file_tools", FILE_TOOLS),
    ("tts_tools", &["text_to_speech"]),
];
