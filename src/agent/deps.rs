//! Everything an agent needs, built once per process and shared by every session's agent:
//! the model client, the tool registry and its shared state, the store and the settings.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::message::ChatMessage;
use super::prompt;
use super::provider::{ModelClient, ProviderError};
use super::turn_images::TurnImages;
use crate::config::{Config, LoadedConfig, SkillsConfig};
use crate::home::HermesHome;
use crate::state::Store;
use crate::tools::approval::{ApprovalGate, ApprovalPrompt, ApprovalSettings};
use crate::tools::clarify::ClarifyCallback;
use crate::tools::context::{Authority, Caller};
use crate::tools::delegate::DelegationLimits;
use crate::tools::memory::MemoryStore;
use crate::tools::process_registry::ProcessRegistry;
use crate::tools::todo::TodoStore;
use crate::tools::{ToolCtx, ToolLimits, ToolRegistry, builtin_registry};

/// The context window assumed when neither config nor the model says otherwise.
pub const DEFAULT_CONTEXT_LENGTH: usize = 128_000;
/// Model calls a sub-agent may make (`delegation.max_iterations` in Hermes).
pub const DELEGATE_MAX_TURNS: u32 = 50;

/// Loop settings taken from the validated configuration.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub max_turns: u32,
    pub context_length: usize,
    pub compression_enabled: bool,
    pub compression_threshold: f64,
    pub protect_last_n: usize,
    pub stream: bool,
    /// An explicit toolset list that wins over the platform's (a scheduled job's own).
    pub enabled_toolsets: Option<Vec<String>>,
    /// `agent.disabled_toolsets`, subtracted last everywhere.
    pub disabled_toolsets: Vec<String>,
    /// `platform_toolsets`: each listed platform's toolsets (see `tools::toolsets::platform`).
    pub platform_toolsets: BTreeMap<String, Vec<String>>,
    /// The enabled MCP servers' names: every platform gets them unless its list says not.
    pub mcp_servers: BTreeSet<String>,
    /// `agent.image_input_mode` and `model.supports_vision`: whether images a tool returned
    /// go to the model as image parts.
    pub image_input_mode: crate::config::ImageInputMode,
    pub supports_vision: Option<bool>,
    pub cwd: PathBuf,
    /// `context_file_max_chars`: the cap on each context file (`None`: from the window).
    pub context_file_max_chars: Option<u64>,
    /// `skills:`: which skills each platform may use, extra skill directories.
    pub skills: SkillsConfig,
    /// Which guidance blocks and platform note the system prompt carries.
    pub prompt: crate::config::PromptConfig,
    /// `gateway.guest_tools`: what a guest's turn may use.
    pub guest_tools: Vec<String>,
    /// `tts:`/`voice:` with the network settings, for `text_to_speech`.
    pub speech: crate::tools::tts::tool::SpeechSettings,
}

impl AgentSettings {
    pub fn from_config(config: &Config, cwd: PathBuf) -> Self {
        Self {
            max_turns: config.agent.max_turns,
            context_length: config
                .model
                .context_length
                .map(|n| n as usize)
                .unwrap_or(DEFAULT_CONTEXT_LENGTH),
            compression_enabled: config.compression.enabled,
            compression_threshold: config.compression.threshold,
            protect_last_n: config.compression.protect_last_n as usize,
            stream: true,
            enabled_toolsets: None,
            disabled_toolsets: config.toolsets.disabled_toolsets.clone(),
            platform_toolsets: config.toolsets.platform_toolsets.clone(),
            mcp_servers: config
                .mcp_servers
                .iter()
                .filter(|(_, server)| server.enabled)
                .map(|(name, _)| name.clone())
                .collect(),
            image_input_mode: config.media.image_input_mode,
            supports_vision: config.media.supports_vision,
            cwd,
            context_file_max_chars: config.context_file_max_chars,
            skills: config.skills.clone(),
            prompt: config.prompt.clone(),
            guest_tools: config.gateway.guest_tools.clone(),
            speech: crate::tools::tts::tool::SpeechSettings::from_config(config),
        }
    }
}

/// How the agent reaches the person it works for (terminal prompts, chat buttons).
#[derive(Default, Clone)]
pub struct UserPrompts {
    pub approval: Option<ApprovalPrompt>,
    pub clarify: Option<ClarifyCallback>,
}

impl std::fmt::Debug for UserPrompts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserPrompts")
            .field("approval", &self.approval.is_some())
            .field("clarify", &self.clarify.is_some())
            .finish()
    }
}

/// The environment tools (and the processes they start) see: the loaded environment with
/// `HERMES_HOME` set to the resolved home, so a child never falls back to another profile,
/// and the `terminal.env_passthrough` variables marked to pass the secret filter.
fn child_env(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    passthrough: &[String],
) -> BTreeMap<String, String> {
    let mut env = env.clone();
    crate::process::env::mark_passthrough(&mut env, passthrough);
    for (key, value) in home.child_env() {
        env.insert(key.to_owned(), value.display().to_string());
    }
    env
}

/// The web tools' settings from `config`: its `web:` section and the configured networking
/// (CA certificates, proxies for the configured services).
fn web_settings(config: &Config) -> Arc<crate::tools::web::WebSettings> {
    let net = hermes_adapter::net::Net::new(&config.network).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "web tools use the default networking: the configured one failed");
        hermes_adapter::net::Net::direct()
    });
    Arc::new(crate::tools::web::WebSettings::new(config.web.clone(), net))
}

/// The shared dependencies of every agent in this process.
pub struct AgentDeps {
    pub client: ModelClient,
    pub registry: ToolRegistry,
    pub store: Store,
    pub settings: AgentSettings,
    pub home: HermesHome,
    pub approvals: Arc<ApprovalGate>,
    pub processes: Arc<ProcessRegistry>,
    pub memory: Arc<MemoryStore>,
    /// Where a journaled turn's photos wait for its end (shared in a cluster).
    pub turn_images: TurnImages,
    pub clarify: Option<ClarifyCallback>,
    pub delegation: DelegationLimits,
    pub limits: ToolLimits,
    pub env: BTreeMap<String, String>,
    /// The sandboxes `terminal:` configures (`None`: commands run on this host), shared with
    /// every copy: a reload keeps the open ones.
    pub sandboxes: Option<Arc<crate::tools::backend::Sandboxes>>,
    /// `terminal.sandbox_scope`: who shares a sandbox.
    pub sandbox_scope: crate::config::SandboxScope,
    /// The operator's approved shell hooks (`hooks:`), run around turns and tool calls.
    pub hooks: Arc<crate::hooks::ShellHooks>,
    /// The web tools' backends, private-URL switch and networking (`web:`).
    pub web: Arc<crate::tools::web::WebSettings>,
    /// Shared with [`AgentDeps::reconfigured`] copies, so a reload keeps the lists.
    todos: Arc<Mutex<HashMap<String, Arc<TodoStore>>>>,
    /// The tool definitions offered per platform, reused between model calls; never shared
    /// with a copy, whose settings may differ.
    offers: Arc<super::tool_offer::OfferCache>,
}

/// A tool a guest's turn named although `gateway.guest_tools` withholds it; the model reads
/// the text as the tool's result.
#[derive(Debug, thiserror::Error)]
#[error(
    "The tool {name} is not available in this conversation: the person asking is a guest of \
     an allowed group, not an allowed user, and gateway.guest_tools does not include it. \
     Answer without it; the bot's owner can add it to gateway.guest_tools or make the person \
     an allowed user."
)]
pub struct WithheldTool {
    name: String,
}

impl std::fmt::Debug for AgentDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentDeps")
            .field("home", &self.home)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl AgentDeps {
    /// Builds the dependencies from the loaded configuration. Fails with one clear line when
    /// no model provider is configured.
    pub fn build(
        home: &HermesHome,
        loaded: &LoadedConfig,
        store: Store,
        prompts: UserPrompts,
    ) -> Result<Self, ProviderError> {
        let client = ModelClient::from_config(&loaded.config)?;
        Ok(Self::with_client(home, loaded, store, prompts, client))
    }

    /// As [`AgentDeps::build`] with an explicit model client (tests, benchmarks).
    pub fn with_client(
        home: &HermesHome,
        loaded: &LoadedConfig,
        store: Store,
        prompts: UserPrompts,
        client: ModelClient,
    ) -> Self {
        let config = &loaded.config;
        let cwd = super::workdir::starting_dir(&config.terminal, home);
        let approval = ApprovalSettings::from_config(config, home, &loaded.env);
        let memory = MemoryStore::open(home).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read MEMORY.md/USER.md; starting with empty memory");
            MemoryStore::new(
                home,
                crate::tools::memory::DEFAULT_MEMORY_CHAR_LIMIT,
                crate::tools::memory::DEFAULT_USER_CHAR_LIMIT,
            )
        });
        // Several instances on PostgreSQL share the memory files there, and the photos of
        // turns in progress (any instance may resume a turn).
        let shared = crate::state::shared_files(config);
        let turn_images = match &shared {
            Ok(Some(shared)) => TurnImages::Shared(shared.clone()),
            _ => TurnImages::Home(home.clone()),
        };
        let memory = match shared {
            Ok(Some(shared)) => memory.with_shared(shared).unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot load the shared memory files; memory starts empty on this instance");
                MemoryStore::new(
                    home,
                    crate::tools::memory::DEFAULT_MEMORY_CHAR_LIMIT,
                    crate::tools::memory::DEFAULT_USER_CHAR_LIMIT,
                )
            }),
            Ok(None) => memory,
            Err(e) => {
                tracing::error!(error = %e, "cannot reach the shared memory files; using this home's files");
                memory
            }
        };
        Self {
            client,
            registry: builtin_registry(),
            store,
            settings: AgentSettings::from_config(config, cwd.clone()),
            home: home.clone(),
            approvals: Arc::new(ApprovalGate::new(approval, prompts.approval)),
            processes: Arc::new(ProcessRegistry::new()),
            memory: Arc::new(memory),
            turn_images,
            clarify: prompts.clarify,
            delegation: DelegationLimits::default(),
            limits: ToolLimits {
                terminal_timeout: std::time::Duration::from_secs(config.terminal.timeout_secs),
                keep_cwd: config.terminal.persistent_shell,
                ..ToolLimits::default()
            },
            env: child_env(home, &loaded.env, &config.terminal.env_passthrough),
            sandboxes: crate::tools::backend::sandboxes(&config.terminal, home.path(), &loaded.env),
            sandbox_scope: config.terminal.sandbox_scope,
            hooks: Arc::new(crate::hooks::ShellHooks::load(
                &config.hooks,
                home,
                &loaded.env,
                &cwd,
            )),
            web: web_settings(config),
            todos: Arc::new(Mutex::new(HashMap::new())),
            offers: Arc::default(),
        }
    }

    /// A copy for a reloaded configuration (SIGHUP): a new model client, loop settings and
    /// tool environment, sharing everything that holds state across turns (approvals,
    /// background processes, memory, to-do lists) so nothing in flight is lost. Agents
    /// holding the old copy finish their turn on the old model.
    pub fn reconfigured(&self, loaded: &LoadedConfig, client: ModelClient) -> Self {
        let mut copy = self.with_model_client(client);
        copy.settings = AgentSettings::from_config(&loaded.config, self.settings.cwd.clone());
        copy.env = child_env(
            &self.home,
            &loaded.env,
            &loaded.config.terminal.env_passthrough,
        );
        copy.limits.terminal_timeout =
            std::time::Duration::from_secs(loaded.config.terminal.timeout_secs);
        copy.limits.keep_cwd = loaded.config.terminal.persistent_shell;
        copy.hooks = Arc::new(crate::hooks::ShellHooks::load(
            &loaded.config.hooks,
            &self.home,
            &loaded.env,
            &self.settings.cwd,
        ));
        copy.web = web_settings(&loaded.config);
        copy
    }

    /// A copy that talks through `client` (a scheduled job's model override) and shares
    /// everything else, settings included.
    pub fn with_model_client(&self, client: ModelClient) -> Self {
        Self {
            client,
            registry: self.registry.clone(),
            store: self.store.clone(),
            settings: self.settings.clone(),
            home: self.home.clone(),
            approvals: Arc::clone(&self.approvals),
            processes: Arc::clone(&self.processes),
            memory: Arc::clone(&self.memory),
            turn_images: self.turn_images.clone(),
            clarify: self.clarify.clone(),
            delegation: self.delegation,
            limits: self.limits,
            env: self.env.clone(),
            sandboxes: self.sandboxes.clone(),
            sandbox_scope: self.sandbox_scope,
            hooks: Arc::clone(&self.hooks),
            web: Arc::clone(&self.web),
            todos: Arc::clone(&self.todos),
            offers: Arc::default(),
        }
    }

    /// These dependencies with dynamic tools (the MCP servers') beside the built-ins; a
    /// [`AgentDeps::reconfigured`] copy keeps them.
    pub fn with_tool_overlay(mut self, overlay: crate::tools::ToolOverlay) -> Self {
        self.offers = Arc::default();
        self.registry = self.registry.with_overlay(overlay);
        self
    }

    /// The model name recorded on new sessions.
    pub fn model_name(&self) -> String {
        self.client
            .endpoints()
            .first()
            .map(|e| e.model.clone())
            .unwrap_or_default()
    }

    /// The system prompt for a new conversation on `platform` (`cli`, `telegram`, ...),
    /// stable for the conversation's whole life.
    pub fn system_prompt(&self, platform: &str) -> String {
        self.system_prompt_for(platform, &self.model_name())
    }

    /// [`AgentDeps::system_prompt`] for a conversation that will talk to `model` (a chat's
    /// `/model` choice), which picks the model-family guidance.
    pub fn system_prompt_for(&self, platform: &str, model: &str) -> String {
        self.system_prompt_with_tools(platform, platform, model)
    }

    /// The system prompt for `platform` with the tools `tool_platform` is offered (a
    /// sub-agent has its own platform name but its parent's tools), talking to `model`.
    pub fn system_prompt_with_tools(
        &self,
        platform: &str,
        tool_platform: &str,
        model: &str,
    ) -> String {
        let offered: Vec<String> = self
            .tool_definitions("", 0, tool_platform)
            .iter()
            .filter_map(|d| d["function"]["name"].as_str().map(str::to_owned))
            .collect();
        let skills_index = if offered.iter().any(|name| name == "skill_view") {
            let toolsets: Vec<String> = offered
                .iter()
                .filter_map(|name| self.registry.get(name).map(|e| e.toolset.clone()))
                .collect();
            let roots = crate::skills::skill_dirs(&self.home, &self.settings.skills, &self.env);
            let skills: Vec<_> = crate::skills::enabled(
                &self.home,
                &self.settings.skills,
                &self.env,
                Some(platform),
            )
            .into_iter()
            .filter(|skill| crate::skills::fits_tools(skill, &offered, &toolsets))
            .collect();
            crate::skills::index::render(&skills, &roots)
        } else {
            None
        };
        prompt::build(&prompt::PromptSources {
            home: self.home.path(),
            memory: &self.memory,
            cwd: &self.settings.cwd,
            context_cap: prompt::context_files::cap(
                self.settings.context_file_max_chars,
                Some(self.settings.context_length),
            ),
            skills_index,
            guidance: prompt::guidance::blocks(&self.settings.prompt, &offered, model),
            platform_hint: prompt::guidance::platform_hint(&self.settings.prompt, platform),
        })
    }

    /// Whether the model is offered `name` on `platform` (its toolset enabled there, its
    /// check passing).
    pub fn offers_tool(&self, name: &str, platform: &str) -> bool {
        self.tool_definitions("", 0, platform)
            .iter()
            .any(|d| d["function"]["name"] == name)
    }

    /// The toolsets enabled on `platform`: an explicit list (a job's) or the platform's
    /// `platform_toolsets` resolution.
    pub fn enabled_toolsets(&self, platform: &str) -> Vec<String> {
        if let Some(explicit) = &self.settings.enabled_toolsets {
            return crate::tools::toolsets::with_mcp_servers(explicit, &self.settings.mcp_servers);
        }
        crate::tools::toolsets::platform_toolsets(
            platform,
            self.settings
                .platform_toolsets
                .get(platform)
                .map(Vec::as_slice),
            &self.settings.mcp_servers,
            &self.settings.disabled_toolsets,
        )
    }

    /// The tool definitions offered to the model on `platform`; sub-agents past the spawn
    /// depth cannot delegate further.
    pub fn tool_definitions(&self, _session_id: &str, depth: u32, platform: &str) -> Vec<Value> {
        self.tool_offer(depth, platform).as_ref().clone()
    }

    /// [`AgentDeps::tool_definitions`], shared rather than copied: the same offer is reused
    /// between model calls while nothing it depends on changed (`agent::tool_offer`).
    pub fn tool_offer(&self, depth: u32, platform: &str) -> Arc<Vec<Value>> {
        let enabled = self.enabled_toolsets(platform);
        let depth_capped = depth as usize >= self.delegation.max_spawn_depth;
        let key = super::tool_offer::OfferKey {
            platform: platform.to_owned(),
            enabled: enabled.clone(),
            disabled: self.settings.disabled_toolsets.clone(),
            depth_capped,
        };
        self.offers
            .get_or_build(key, self.registry.dynamic_snapshot(), || {
                let ctx = self.tool_ctx("", CancellationToken::new());
                let mut definitions = self.registry.definitions(
                    Some(&enabled),
                    &self.settings.disabled_toolsets,
                    &ctx,
                );
                if depth_capped {
                    definitions.retain(|d| d["function"]["name"] != "delegate_task");
                }
                definitions
            })
    }

    /// [`AgentDeps::tool_offer`] for a turn acting for `caller`: a guest's turn is offered
    /// only what `gateway.guest_tools` selects, so the model never sees the rest.
    pub fn tool_definitions_for(
        &self,
        _session_id: &str,
        depth: u32,
        platform: &str,
        caller: &Caller,
    ) -> Arc<Vec<Value>> {
        let offer = self.tool_offer(depth, platform);
        if caller.authority != Authority::Guest {
            return offer;
        }
        Arc::new(
            offer
                .iter()
                .filter(|d| {
                    d["function"]["name"]
                        .as_str()
                        .is_some_and(|name| self.guest_may_use(name))
                })
                .cloned()
                .collect(),
        )
    }

    /// Whether `gateway.guest_tools` gives guests the tool `name`.
    fn guest_may_use(&self, name: &str) -> bool {
        let toolset = self.registry.entry(name).map(|entry| entry.toolset);
        crate::tools::toolsets::guest::allows(&self.settings.guest_tools, name, toolset.as_deref())
    }

    /// Refuses a tool call that `caller` may not make, saying what would allow it.
    pub fn check_caller_may_use(&self, caller: &Caller, name: &str) -> Result<(), WithheldTool> {
        if caller.authority != Authority::Guest || self.guest_may_use(name) {
            return Ok(());
        }
        tracing::warn!(
            tool = name,
            platform = %caller.platform,
            chat_id = %caller.chat_id,
            "a guest's turn called a tool withheld from guests; refused"
        );
        Err(WithheldTool {
            name: name.to_owned(),
        })
    }

    pub fn tool_ctx(&self, session_id: &str, cancel: CancellationToken) -> ToolCtx {
        ToolCtx {
            home: self.home.clone(),
            cwd: self.settings.cwd.clone(),
            allowed_roots: vec![self.settings.cwd.clone(), self.home.path().to_path_buf()],
            session_id: session_id.to_owned(),
            store: Some(self.store.clone()),
            approvals: Arc::clone(&self.approvals),
            processes: Arc::clone(&self.processes),
            cancel,
            env: self.env.clone(),
            clarify: self.clarify.clone(),
            limits: self.limits,
            skills: Arc::new(self.settings.skills.clone()),
            platform: None,
            caller: crate::tools::context::Caller::operator(),
            sandbox: None,
            web: Arc::clone(&self.web),
            speech: Arc::new(self.settings.speech.clone()),
        }
    }

    /// Where a tool call acting for `caller` runs its commands and touches its files: the
    /// caller's scope among the configured sandboxes, `None` for this host.
    pub fn sandbox_for(
        &self,
        caller: &crate::tools::context::Caller,
    ) -> Option<crate::tools::backend::SandboxRef> {
        let sandboxes = self.sandboxes.as_ref()?;
        Some(crate::tools::backend::SandboxRef {
            sandboxes: Arc::clone(sandboxes),
            scope: crate::tools::backend::Scope::for_turn(
                self.sandbox_scope,
                &caller.platform,
                &caller.chat_id,
                caller.user_id.as_deref(),
            ),
        })
    }

    /// The session's to-do list. Lists live in memory while the session's slot does; a
    /// session seen again after eviction gets its list back from `history` (the last `todo`
    /// result answering a `todo` call, as Hermes hydrates a fresh agent).
    pub fn todos(&self, session_id: &str, history: &[ChatMessage]) -> Arc<TodoStore> {
        let mut todos = self.todos.lock().unwrap_or_else(|p| p.into_inner());
        let store = todos.entry(session_id.to_owned()).or_insert_with(|| {
            let store = TodoStore::new();
            if let Some(items) = super::todo_history::last_written(history) {
                store.write(&items, false);
            }
            Arc::new(store)
        });
        Arc::clone(store)
    }

    /// Forgets what is kept per session in memory (to-do list, approvals for the session,
    /// the shell's cwd) once the session's slot is evicted, so these maps stay bounded by
    /// the recently active conversations.
    pub fn forget_session(&self, session_id: &str) {
        self.todos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
        self.approvals.clear_session(session_id);
        self.processes.forget_session_cwd(session_id);
    }

    /// Sessions with per-session state in memory: (to-do lists, session approvals, cwds).
    pub fn sessions_in_memory(&self) -> (usize, usize, usize) {
        let todos = self.todos.lock().unwrap_or_else(|p| p.into_inner()).len();
        (
            todos,
            self.approvals.sessions_tracked(),
            self.processes.cwds_tracked(),
        )
    }
}
