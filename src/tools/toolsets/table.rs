//! The static toolset table (Python `TOOLSETS` and `_LEGACY_TOOLSET_MAP`), listing only
//! the tools hermesd implements.

/// A named group of tools, possibly including other toolsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toolset {
    pub name: &'static str,
    pub description: &'static str,
    pub tools: &'static [&'static str],
    pub includes: &'static [&'static str],
    /// Posture toolsets re-list core tools without owning them (see [`super::resolve_toolsets`]).
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
];

/// Webhook events may carry untrusted third-party text: no file or shell access.
const WEBHOOK_SAFE_TOOLS: &[&str] = &["clarify"];

const FILE_TOOLS: &[&str] = &["read_file", "write_file", "patch", "search_files"];

const fn set(
    name: &'static str,
    description: &'static str,
    tools: &'static [&'static str],
) -> Toolset {
    Toolset {
        name,
        description,
        tools,
        includes: &[],
        posture: false,
    }
}

const fn preset(name: &'static str, description: &'static str) -> Toolset {
    set(name, description, HERMES_CORE_TOOLS)
}

/// The static toolset table, in the Python order.
pub const TOOLSETS: &[Toolset] = &[
    set("web", "Web research and content extraction tools", &[]),
    set(
        "search",
        "Web search only (no content extraction/scraping)",
        &[],
    ),
    set("x_search", "Search X (Twitter) posts and threads", &[]),
    set("vision", "Image analysis and vision tools", &[]),
    set(
        "video",
        "Video analysis and understanding tools (opt-in, not in default toolset)",
        &[],
    ),
    set("image_gen", "Creative generation tools (images)", &[]),
    set("video_gen", "Video generation tools", &[]),
    set(
        "computer_use",
        "Background desktop control via cua-driver",
        &[],
    ),
    set(
        "terminal",
        "Terminal/command execution and process management tools",
        &["terminal", "process"],
    ),
    set(
        "skills",
        "Access, create, edit, and manage skill documents with specialized instructions and knowledge",
        &[],
    ),
    set(
        "browser",
        "Browser automation for web interaction (navigate, click, type, scroll, iframes, hold-click) with web search for finding URLs",
        &[],
    ),
    set(
        "cronjob",
        "Cronjob management tool - create, list, update, pause, resume, remove, and trigger scheduled tasks",
        &[],
    ),
    set(
        "file",
        "File manipulation tools: read, write, patch (with fuzzy matching), and search (content + files)",
        FILE_TOOLS,
    ),
    set(
        "tts",
        "Text-to-speech: convert text to audio with Edge TTS (free), ElevenLabs, OpenAI, or xAI",
        &[],
    ),
    set(
        "todo",
        "Task planning and tracking for multi-step work",
        &["todo"],
    ),
    set(
        "memory",
        "Persistent memory across sessions (personal notes + user profile)",
        &["memory"],
    ),
    set(
        "context_engine",
        "Runtime tools exposed by the active context engine",
        &[],
    ),
    set(
        "session_search",
        "Search and recall past conversations with summarization",
        &["session_search"],
    ),
    set(
        "project",
        "Desktop Projects — create/switch named workspaces (GUI sessions only)",
        &[],
    ),
    set(
        "clarify",
        "Ask the user clarifying questions (multiple-choice or open-ended)",
        &["clarify"],
    ),
    set(
        "code_execution",
        "Run Python scripts that call tools programmatically (reduces LLM round trips)",
        &[],
    ),
    set(
        "delegation",
        "Spawn subagents with isolated context for complex subtasks",
        &["delegate_task"],
    ),
    set(
        "homeassistant",
        "Home Assistant smart home control and monitoring",
        &[],
    ),
    set("kanban", "Kanban multi-agent coordination", &[]),
    set(
        "discord",
        "Discord read and participate tools (fetch messages, search members, create threads)",
        &[],
    ),
    set(
        "discord_admin",
        "Discord server management (list channels/roles, pin messages, assign roles)",
        &[],
    ),
    set(
        "yuanbao",
        "Yuanbao platform tools - group info, member queries, DM, stickers",
        &[],
    ),
    set("feishu_doc", "Read Feishu/Lark document content", &[]),
    set(
        "feishu_drive",
        "Feishu/Lark document comment operations (list, reply, add)",
        &[],
    ),
    set(
        "spotify",
        "Native Spotify playback, search, playlist, album, and library tools",
        &[],
    ),
    Toolset {
        name: "debugging",
        description: "Debugging and troubleshooting toolkit",
        tools: &["terminal", "process"],
        includes: &["web", "file"],
        posture: false,
    },
    Toolset {
        name: "safe",
        description: "Safe toolkit without terminal access",
        tools: &[],
        includes: &["web", "vision", "image_gen"],
        posture: false,
    },
    Toolset {
        name: "coding",
        description: "Coding-focused toolset: files, terminal, search, web docs, skills, todo, delegate, vision, browser",
        tools: HERMES_CORE_TOOLS,
        includes: &[],
        posture: true,
    },
    set(
        "hermes-acp",
        "Editor integration (VS Code, Zed, JetBrains) — coding-focused tools without messaging, audio, or clarify UI",
        API_SERVER_TOOLS,
    ),
    set(
        "hermes-api-server",
        "OpenAI-compatible API server — full agent tools accessible via HTTP (no interactive UI tools like clarify or send_message)",
        API_SERVER_TOOLS,
    ),
    preset(
        "hermes-cli",
        "Full interactive CLI toolset - all default tools plus cronjob management",
    ),
    preset(
        "hermes-cron",
        "Default cron toolset - same core tools as hermes-cli; gated by `hermes tools`",
    ),
    preset(
        "hermes-telegram",
        "Telegram bot toolset - full access for personal use (terminal has safety checks)",
    ),
    preset(
        "hermes-discord",
        "Discord bot toolset - full access (terminal has safety checks via dangerous command approval)",
    ),
    preset(
        "hermes-whatsapp",
        "WhatsApp bot toolset - similar to Telegram (personal messaging, more trusted)",
    ),
    preset(
        "hermes-slack",
        "Slack bot toolset - full access for workspace use (terminal has safety checks)",
    ),
    preset(
        "hermes-signal",
        "Signal bot toolset - encrypted messaging platform (full access)",
    ),
    preset(
        "hermes-bluebubbles",
        "BlueBubbles iMessage bot toolset - Apple iMessage via local BlueBubbles server",
    ),
    preset(
        "hermes-homeassistant",
        "Home Assistant bot toolset - smart home event monitoring and control",
    ),
    preset(
        "hermes-email",
        "Email bot toolset - interact with Hermes via email (IMAP/SMTP)",
    ),
    preset(
        "hermes-mattermost",
        "Mattermost bot toolset - self-hosted team messaging (full access)",
    ),
    preset(
        "hermes-matrix",
        "Matrix bot toolset - decentralized encrypted messaging (full access)",
    ),
    preset(
        "hermes-dingtalk",
        "DingTalk bot toolset - enterprise messaging platform (full access)",
    ),
    preset(
        "hermes-feishu",
        "Feishu/Lark bot toolset - enterprise messaging via Feishu/Lark (full access)",
    ),
    preset(
        "hermes-weixin",
        "Weixin bot toolset - personal WeChat messaging via iLink (full access)",
    ),
    preset(
        "hermes-qqbot",
        "QQBot toolset - QQ messaging via Official Bot API v2 (full access)",
    ),
    preset(
        "hermes-wecom",
        "WeCom bot toolset - enterprise WeChat messaging (full access)",
    ),
    preset(
        "hermes-wecom-callback",
        "WeCom callback toolset - enterprise self-built app messaging (full access)",
    ),
    preset(
        "hermes-yuanbao",
        "Yuanbao Bot 元宝消息平台工具集 - 群信息、成员查询、私聊、贴纸表情",
    ),
    preset(
        "hermes-sms",
        "SMS bot toolset - interact with Hermes via SMS (Twilio)",
    ),
    set(
        "hermes-webhook",
        "Webhook toolset - receive and process external webhook events",
        WEBHOOK_SAFE_TOOLS,
    ),
    Toolset {
        name: "hermes-gateway",
        description: "Gateway toolset - union of all messaging platform tools",
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
    ("skills_tools", &[]),
    ("browser_tools", &[]),
    ("cronjob_tools", &[]),
    ("file_tools", FILE_TOOLS),
    ("tts_tools", &[]),
];
