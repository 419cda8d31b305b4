//! What a tool call may use: the home, working directory and allowed roots, the session,
//! the state store, the approval gate, the process registry, a cancellation token and the
//! environment map. Cheap to clone; the loop builds one per session and clones it per call.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::approval::{ApprovalGate, ApprovalSettings, DetectionEnv};
use super::clarify_request::ClarifyCallback;
use super::process_registry::ProcessRegistry;
use crate::home::HermesHome;
use crate::state::Store;

/// Output and timing limits (Python `tool_output.*` and terminal defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Terminal output cap in characters (`tool_output.max_bytes`).
    pub max_output_chars: usize,
    /// read_file lines per call (`tool_output.max_lines`).
    pub max_read_lines: usize,
    /// Longer lines are cut with `... [truncated]` (`tool_output.max_line_length`).
    pub max_line_length: usize,
    /// Characters one read_file result may carry.
    pub max_read_chars: usize,
    /// Default foreground timeout (`terminal.timeout`).
    pub terminal_timeout: Duration,
    /// Largest foreground timeout a model may request.
    pub foreground_max_timeout: Duration,
    /// `terminal.persistent_shell`: a command starts where the previous one ended (false:
    /// every command starts in the session's starting directory).
    pub keep_cwd: bool,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            max_output_chars: 50_000,
            max_read_lines: 2000,
            max_line_length: 2000,
            max_read_chars: 100_000,
            terminal_timeout: Duration::from_secs(180),
            foreground_max_timeout: Duration::from_secs(600),
            keep_cwd: true,
        }
    }
}

/// How much a turn's requester is trusted (see SECURITY.md's threat model): the operator
/// (the CLI, cron, the host's files), a person the configuration names (an allowlist, an
/// approved pairing, an allowed role, the HTTP API's key), or a guest admitted only because
/// the chat they wrote in is allowed (or as an allowed bot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Authority {
    #[default]
    Operator,
    AllowedUser,
    Guest,
}

impl Authority {
    /// Whether this requester may change what the daemon does for everyone (control
    /// commands, permanent approvals, other chats' cron jobs).
    pub fn is_trusted(self) -> bool {
        !matches!(self, Authority::Guest)
    }
}

/// Who a turn's tool calls act for: their authority and the chat the turn came from.
/// Chat fields are empty for the operator's own turns (CLI, cron).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    pub authority: Authority,
    pub platform: String,
    pub chat_id: String,
    pub user_id: Option<String>,
    /// The thread of the chat the turn answers, where the platform has threads.
    pub thread_id: Option<String>,
}

impl Caller {
    /// The operator (the CLI's `chat`, scheduled jobs).
    pub fn operator() -> Self {
        Self::default()
    }

    /// The chat a background process started for this caller is told about; `None` for the
    /// operator (CLI, scheduled jobs), who has no chat to tell.
    pub fn process_origin(&self) -> Option<super::process_registry::ProcessOrigin> {
        (!self.platform.is_empty() && !self.chat_id.is_empty()).then(|| {
            super::process_registry::ProcessOrigin {
                platform: self.platform.clone(),
                chat_id: self.chat_id.clone(),
                thread_id: self.thread_id.clone(),
            }
        })
    }
}

/// The dependencies of one tool call.
#[derive(Clone)]
pub struct ToolCtx {
    pub home: HermesHome,
    /// The default working directory for commands and relative paths.
    pub cwd: PathBuf,
    /// File tools only touch paths under these (after resolving symlinks).
    pub allowed_roots: Vec<PathBuf>,
    pub session_id: String,
    pub store: Option<Store>,
    pub approvals: Arc<ApprovalGate>,
    pub processes: Arc<ProcessRegistry>,
    /// Cancelled when the user interrupts the turn.
    pub cancel: CancellationToken,
    /// The environment tools see; never the process environment directly.
    pub env: BTreeMap<String, String>,
    /// How `clarify` reaches the user; `None` where nobody can answer.
    pub clarify: Option<ClarifyCallback>,
    pub limits: ToolLimits,
    /// `skills:` settings (disabled names, external directories) for the skills tools.
    pub skills: Arc<crate::config::SkillsConfig>,
    /// The platform the session talks on (`telegram`, `cli`, ...): skills disabled there
    /// are hidden from the skills tools too. `None`: only the global list applies.
    pub platform: Option<String>,
    /// Whom the call acts for; the operator unless a chat turn says otherwise.
    pub caller: Caller,
    /// Where commands and files live when `terminal:` configures a sandbox, container or
    /// remote machine; `None`: this host, under [`cwd`](Self::cwd) and the allowed roots.
    pub sandbox: Option<super::backend::SandboxRef>,
    /// `web:` backends, the private-URL switch and the resolver for the web tools.
    pub web: Arc<super::web::WebSettings>,
    /// `tts:`/`voice:` and the network settings, for `text_to_speech`.
    pub speech: Arc<super::tts::tool::SpeechSettings>,
}

impl std::fmt::Debug for ToolCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCtx")
            .field("home", &self.home)
            .field("cwd", &self.cwd)
            .field("allowed_roots", &self.allowed_roots)
            .field("session_id", &self.session_id)
            .field("has_store", &self.store.is_some())
            .field("has_clarify", &self.clarify.is_some())
            .field("caller", &self.caller)
            .field("sandbox", &self.sandbox.as_ref().map(|s| s.scope.id()))
            .finish_non_exhaustive()
    }
}

impl ToolCtx {
    /// The directory the session's shell is in: where its last command finished, else
    /// [`cwd`](Self::cwd).
    pub fn shell_cwd(&self) -> PathBuf {
        self.processes
            .session_cwd(&self.session_id)
            .unwrap_or_else(|| self.cwd.clone())
    }

    /// A context confined to `dir`: cwd and only allowed root `dir`, home `dir/home`, a
    /// minimal environment, approvals in manual mode with no way to ask (dangerous commands
    /// are blocked), no store and no clarify callback.
    pub fn for_tests(dir: &Path) -> Self {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let home = HermesHome::at(dir.join("home"));
        let _ = home.ensure_exists();
        let env: BTreeMap<String, String> = [
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .chain([("HOME".to_owned(), dir.join("home").display().to_string())])
        .collect();
        let mut settings = ApprovalSettings::new(home.config_yaml());
        settings.detection = DetectionEnv::new(
            Some(&dir.join("home")),
            Some(home.path()),
            Path::new("/tmp"),
        );
        Self {
            home,
            cwd: dir.clone(),
            allowed_roots: vec![dir],
            session_id: "test-session".to_owned(),
            store: None,
            approvals: Arc::new(ApprovalGate::new(settings, None)),
            processes: Arc::new(ProcessRegistry::new()),
            cancel: CancellationToken::new(),
            env,
            clarify: None,
            limits: ToolLimits::default(),
            skills: Arc::default(),
            platform: None,
            caller: Caller::operator(),
            sandbox: None,
            web: Arc::default(),
            speech: Arc::default(),
        }
    }
}
