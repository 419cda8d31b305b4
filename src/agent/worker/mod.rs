//! The agent loop: one conversation (session), one turn at a time.
//!
//! A turn appends the user's message, then alternates model calls and tool rounds until the
//! model answers without tool calls or the iteration budget runs out. Every message is
//! persisted through the store's write queue as the turn proceeds, so a crash loses at most
//! the in-flight model call. A turn is cancellable at any await point: a cancelled model
//! call's partial output never enters the history, and unanswered tool calls get an
//! "interrupted" result so the history stays well-formed.

mod compression;
pub use compression::Compressed;
mod hook_points;
mod journaled;
mod steer_marker;
mod tool_round;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use steer_marker::append_steer;

use super::budget::IterationBudget;
use super::deps::AgentDeps;
use super::event_channel::{EventSink, emit};
use super::events::AgentEvent;
use super::history;
use super::message::{ChatMessage, ImagePart};
use super::provider::{ModelReply, ModelRequest, ProviderError, StreamDelta};
use crate::state::{NewSession, StoreError, UsageDelta};

/// Why a turn could not complete.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    Provider(#[from] ProviderError),
    #[error("state.db: {0}")]
    Store(#[from] StoreError),
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The reply to show the user.
    pub reply: String,
    /// The turn was cancelled before the model finished; `reply` is empty.
    pub interrupted: bool,
    /// Model calls made during this turn.
    pub iterations: u32,
    /// The session the conversation now lives in (a child after compression).
    pub session_id: String,
}

const BUDGET_EXHAUSTED_PROMPT: &str = "You have reached the maximum number of steps for this \
request. Do not call any tools. Summarise for the user what you have done so far, what \
remains, and how they can continue.";

/// The platform name a sub-agent's prompt and tools see (no platform's disabled skills).
const SUBAGENT_PLATFORM: &str = "subagent";

/// One conversation's agent.
pub struct Agent {
    deps: Arc<AgentDeps>,
    session_id: String,
    history: Vec<ChatMessage>,
    /// Fixed for the conversation's life, so provider prompt caches stay valid.
    system_prompt: String,
    budget_max: u32,
    /// Set for sub-agents: their sessions are tagged and they cannot delegate further.
    depth: u32,
    /// Messages the user sent mid-turn (`/steer`), delivered after the next tool round.
    steer: Option<SteerInbox>,
    /// Images for the next turn's user message ([`Agent::attach_images`]).
    pending_images: Vec<ImagePart>,
    /// The current [`Agent::run_turn`]'s user message is stored ([`Agent::turn_recorded`]).
    turn_recorded: bool,
    /// The current turn is a journaled one (a chat event's): each tool call is marked as
    /// started before it runs, so a resume can run the calls that never started.
    marks_tool_starts: bool,
    /// An HTTP API request's own `system` text, added after the stored prompt for this
    /// request's calls only (never stored).
    request_system: Option<String>,
    /// The session's `/model` choice: the shared client with that model first.
    client: Option<super::provider::ModelClient>,
    /// Where the session talks (`sessions.source`: `telegram`, `cli`, ...).
    platform: String,
    /// Whose `platform_toolsets` pick the tools: the session's platform, or for a
    /// sub-agent its parent's.
    tool_platform: String,
    /// Whom the current turn acts for (a guest's turn is offered fewer tools); the
    /// operator unless the gateway says otherwise before each turn.
    caller: crate::tools::context::Caller,
    /// What the `pre_llm_call` hooks add to this turn's user message (requests only).
    turn_context: Option<String>,
}

/// Where `/steer` texts wait for the next tool round of a running turn.
pub type SteerInbox = Arc<std::sync::Mutex<Vec<String>>>;

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session_id", &self.session_id)
            .field("messages", &self.history.len())
            .finish()
    }
}

impl Agent {
    /// Starts a new session (`source` is `cli`, `telegram`, … as stored in state.db).
    pub async fn create(
        deps: Arc<AgentDeps>,
        session_id: String,
        source: &str,
        user_id: Option<String>,
    ) -> Result<Self, AgentError> {
        Self::create_for_model(deps, session_id, source, user_id, None).await
    }

    /// [`Agent::create`] for a conversation that starts on `model` (a chat's `/model`
    /// choice; `None`: the configured default): the prompt's model-family guidance and the
    /// session's recorded model follow it.
    pub async fn create_for_model(
        deps: Arc<AgentDeps>,
        session_id: String,
        source: &str,
        user_id: Option<String>,
        model: Option<&str>,
    ) -> Result<Self, AgentError> {
        let model = model.map_or_else(|| deps.model_name(), str::to_owned);
        let system_prompt = build_prompt(&deps, source, Some(model.clone())).await;
        let mut session = NewSession::new(session_id.clone(), source);
        session.user_id = user_id;
        session.model = Some(model);
        session.system_prompt = Some(system_prompt.clone());
        deps.store.create_session(session).await?;
        let budget_max = deps.settings.max_turns;
        Ok(Self {
            platform: source.to_owned(),
            tool_platform: source.to_owned(),
            deps,
            session_id,
            history: Vec::new(),
            system_prompt,
            budget_max,
            depth: 0,
            steer: None,
            pending_images: Vec::new(),
            turn_recorded: false,
            marks_tool_starts: false,
            request_system: None,
            client: None,
            caller: crate::tools::context::Caller::operator(),
            turn_context: None,
        })
    }

    /// Continues an existing session with its stored history.
    pub async fn resume(deps: Arc<AgentDeps>, session_id: String) -> Result<Self, AgentError> {
        let session = deps
            .store
            .get_session(&session_id)
            .await?
            .ok_or_else(|| StoreError::SessionNotFound(session_id.clone()))?;
        let messages = deps.store.get_messages(&session_id).await?;
        let history = history::from_stored(&messages);
        let system_prompt = match session.system_prompt {
            Some(prompt) => prompt,
            None => build_prompt(&deps, &session.source, None).await,
        };
        let budget_max = deps.settings.max_turns;
        Ok(Self {
            tool_platform: session.source.clone(),
            platform: session.source,
            deps,
            session_id,
            history,
            system_prompt,
            budget_max,
            depth: 0,
            steer: None,
            pending_images: Vec::new(),
            turn_recorded: false,
            marks_tool_starts: false,
            request_system: None,
            client: None,
            caller: crate::tools::context::Caller::operator(),
            turn_context: None,
        })
    }

    pub(crate) fn sub_agent(
        deps: Arc<AgentDeps>,
        session_id: String,
        budget: u32,
        depth: u32,
        parent_tool_platform: &str,
    ) -> Self {
        let system_prompt = deps.system_prompt_with_tools(
            SUBAGENT_PLATFORM,
            parent_tool_platform,
            &deps.model_name(),
        );
        Self {
            platform: SUBAGENT_PLATFORM.to_owned(),
            tool_platform: parent_tool_platform.to_owned(),
            deps,
            session_id,
            history: Vec::new(),
            system_prompt,
            budget_max: budget,
            depth,
            steer: None,
            pending_images: Vec::new(),
            turn_recorded: false,
            marks_tool_starts: false,
            request_system: None,
            client: None,
            caller: crate::tools::context::Caller::operator(),
            turn_context: None,
        }
    }

    /// Layers an API request's `system` text onto the prompt for the next turns' calls.
    pub fn set_request_system(&mut self, system: Option<String>) {
        self.request_system = system;
    }

    /// Uses the chosen model (from the chosen provider, if named) for this session's calls
    /// (`None`: the configured default). Returns false, changing nothing, when no
    /// configured endpoint serves it (nor the endpoint whose listing named it).
    pub fn set_model(&mut self, choice: Option<&super::provider::ModelChoice>) -> bool {
        match choice {
            None => {
                self.client = None;
                true
            }
            Some(choice) => match self.deps.client.with_primary(choice) {
                Some(client) => {
                    self.client = Some(client);
                    true
                }
                None => false,
            },
        }
    }

    /// Images (photos from a chat) to send with the next turn's user message. They reach
    /// only that turn's model calls: the history keeps the message's text, so later turns
    /// do not resend megabytes of pixels with every request.
    pub fn attach_images(&mut self, images: Vec<ImagePart>) {
        self.pending_images = images;
    }

    /// Runs the model/tool loop, then drops the images the turn carried.
    async fn continue_then_forget_images(
        &mut self,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        hook_points::before_turn(self).await;
        let outcome = self.continue_turn(events, cancel).await;
        for message in &mut self.history {
            message.images.clear();
        }
        hook_points::after_turn(self, &outcome).await;
        outcome
    }

    /// Lets `/steer` reach this agent's turns.
    pub fn set_steer_inbox(&mut self, inbox: SteerInbox) {
        self.steer = Some(inbox);
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The platform the session talks on.
    pub fn platform(&self) -> &str {
        &self.platform
    }

    /// The model this session's calls go to first (its `/model` choice or the default).
    fn model_name(&self) -> String {
        self.client
            .as_ref()
            .unwrap_or(&self.deps.client)
            .endpoints()
            .first()
            .map(|e| e.model.clone())
            .unwrap_or_default()
    }

    /// The platform whose toolsets this agent is offered.
    pub fn tool_platform(&self) -> &str {
        &self.tool_platform
    }

    /// Whom the next turns act for (the gateway sets it before every chat turn).
    pub fn set_caller(&mut self, caller: crate::tools::context::Caller) {
        self.caller = caller;
    }

    pub fn caller(&self) -> &crate::tools::context::Caller {
        &self.caller
    }

    pub fn history(&self) -> &[ChatMessage] {
        &self.history
    }

    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    pub fn deps(&self) -> &AgentDeps {
        &self.deps
    }

    pub(crate) fn deps_arc(&self) -> &Arc<AgentDeps> {
        &self.deps
    }

    /// Runs one turn for `user_text`. Cancelling `cancel` stops it at the next await point.
    pub async fn run_turn(
        &mut self,
        user_text: &str,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.deps.memory.reset_consolidation_failures();
        self.marks_tool_starts = false;
        let mut message = ChatMessage::user(user_text);
        message.images = std::mem::take(&mut self.pending_images);
        self.turn_recorded = false;
        self.push(message, None).await?;
        self.turn_recorded = true;
        self.continue_then_forget_images(events, cancel).await
    }

    /// Whether the last [`Agent::run_turn`] stored its user message (a turn cut short after
    /// that is finished with [`Agent::resume_turn`], not run again).
    pub fn turn_recorded(&self) -> bool {
        self.turn_recorded
    }

    /// Finishes a turn whose user message is already stored (the session's last user
    /// message): a stored final answer is returned as is, otherwise the loop continues from
    /// the stored history.
    pub async fn resume_turn(
        &mut self,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.marks_tool_starts = false;
        if let Some(outcome) = self.stored_answer() {
            return Ok(outcome);
        }
        self.continue_then_forget_images(events, cancel).await
    }

    /// The stored final answer ending the history, if the turn got that far.
    fn stored_answer(&self) -> Option<TurnOutcome> {
        let last = self.history.last()?;
        (last.role == super::message::Role::Assistant && last.tool_calls.is_empty()).then(|| {
            TurnOutcome {
                reply: last.content.clone().unwrap_or_default(),
                interrupted: false,
                iterations: 0,
                session_id: self.session_id.clone(),
            }
        })
    }

    /// The model/tool loop after the user's message is in the history.
    async fn continue_turn(
        &mut self,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let mut budget = IterationBudget::new(self.budget_max);
        loop {
            if !budget.take() {
                return self.finish_exhausted(&budget, events, cancel).await;
            }
            self.maybe_compress(events, cancel).await?;
            let request = self.request(true);
            let Some(reply) = self.call_model(&request, events, cancel).await? else {
                return Ok(self.interrupted(budget.used()));
            };
            emit(
                events,
                AgentEvent::Step {
                    iteration: budget.used(),
                },
            );
            if reply.tool_calls.is_empty() {
                let text = reply.content.clone().unwrap_or_default();
                self.push(assistant_from(&reply), Some(&reply)).await?;
                return Ok(TurnOutcome {
                    reply: text,
                    interrupted: false,
                    iterations: budget.used(),
                    session_id: self.session_id.clone(),
                });
            }
            let calls = reply.tool_calls.clone();
            self.push(assistant_from(&reply), Some(&reply)).await?;
            let mut results = tool_round::run(self, &calls, events, cancel).await?;
            if let Some(last) = results.last_mut() {
                append_steer(last, self.steer.as_ref());
            }
            let model = self.model_name();
            for (call, result) in calls.iter().zip(results) {
                let mut message =
                    ChatMessage::tool_result(call.id.clone(), call.name.clone(), result);
                super::tool_images::attach(&self.deps, &model, &mut message).await;
                self.push(message, None).await?;
            }
            if cancel.is_cancelled() {
                return Ok(self.interrupted(budget.used()));
            }
        }
    }

    /// The request for the current history; `with_tools` false for the final summary call.
    fn request(&self, with_tools: bool) -> ModelRequest {
        let tools = if with_tools {
            self.deps.tool_definitions_for(
                &self.session_id,
                self.depth,
                &self.tool_platform,
                &self.caller,
            )
        } else {
            Default::default()
        };
        ModelRequest {
            system: Some(super::prompt::with_request_system(
                &self.system_prompt,
                self.request_system.as_deref(),
            )),
            messages: self.history_with_turn_context(),
            tools,
            max_tokens: None,
            stream: self.deps.settings.stream,
        }
    }

    fn history_with_turn_context(&self) -> Vec<ChatMessage> {
        let mut messages = self.history.clone();
        hook_points::add_turn_context(&mut messages, self.turn_context.as_deref());
        messages
    }

    /// One model call, racing cancellation; `None` when cancelled (nothing is kept).
    async fn call_model(
        &self,
        request: &ModelRequest,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<Option<ModelReply>, AgentError> {
        emit(events, AgentEvent::Thinking(true));
        let sink = events.clone();
        let mut on_delta = move |delta: StreamDelta| match delta {
            StreamDelta::Text(t) => emit(&sink, AgentEvent::Delta(t)),
            StreamDelta::Reasoning(r) => emit(&sink, AgentEvent::Reasoning(r)),
            StreamDelta::Restart => emit(&sink, AgentEvent::StreamRestart),
        };
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            reply = self.client.as_ref().unwrap_or(&self.deps.client).complete(request, &mut on_delta) => Some(reply),
        };
        emit(events, AgentEvent::Thinking(false));
        let Some(reply) = result else { return Ok(None) };
        let mut reply = reply?;
        // What the model says is shown, stored and sent on: no known secret in it.
        reply.content = reply
            .content
            .map(|text| crate::logging::mask_secrets(&text));
        self.deps
            .store
            .record_usage(UsageDelta {
                session_id: self.session_id.clone(),
                model: Some(reply.model.clone()),
                input_tokens: reply.usage.input_tokens as i64,
                output_tokens: reply.usage.output_tokens as i64,
                cache_read_tokens: reply.usage.cache_read_tokens as i64,
                cache_write_tokens: reply.usage.cache_write_tokens as i64,
                reasoning_tokens: reply.usage.reasoning_tokens as i64,
                api_calls: 1,
                billing_provider: Some(reply.provider.clone()),
                ..UsageDelta::default()
            })
            .await?;
        Ok(Some(reply))
    }

    /// Appends to the history and persists it (the write is confirmed before we go on).
    async fn push(
        &mut self,
        message: ChatMessage,
        reply: Option<&ModelReply>,
    ) -> Result<(), AgentError> {
        let stored = history::to_stored(&self.session_id, &message, reply);
        self.deps.store.append_message(stored).await?;
        self.history.push(message);
        Ok(())
    }

    fn interrupted(&self, iterations: u32) -> TurnOutcome {
        TurnOutcome {
            reply: String::new(),
            interrupted: true,
            iterations,
            session_id: self.session_id.clone(),
        }
    }

    /// The budget is spent: one last call without tools asks the model for a summary.
    async fn finish_exhausted(
        &mut self,
        budget: &IterationBudget,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        emit(
            events,
            AgentEvent::Status(format!("iteration budget of {} reached", budget.max())),
        );
        let mut request = self.request(false);
        request
            .messages
            .push(ChatMessage::user(BUDGET_EXHAUSTED_PROMPT));
        let request = ModelRequest {
            messages: super::message::enforce_alternation(request.messages)
                .unwrap_or_else(|_| self.history.clone()),
            ..request
        };
        let reply = match self.call_model(&request, events, cancel).await? {
            Some(reply) => reply.content.unwrap_or_default(),
            None => return Ok(self.interrupted(budget.used())),
        };
        let text = if reply.trim().is_empty() {
            format!(
                "I stopped after {} steps without finishing. Send another message to continue.",
                budget.used()
            )
        } else {
            reply
        };
        self.push(ChatMessage::assistant(text.clone()), None)
            .await?;
        Ok(TurnOutcome {
            reply: text,
            interrupted: false,
            iterations: budget.used(),
            session_id: self.session_id.clone(),
        })
    }
}

/// Builds a session's system prompt on the blocking pool: it reads SOUL.md, the context
/// file and every SKILL.md, and the first build in a process compiles the threat patterns.
async fn build_prompt(deps: &Arc<AgentDeps>, platform: &str, model: Option<String>) -> String {
    let model = model.unwrap_or_else(|| deps.model_name());
    let (shared, name, chosen) = (Arc::clone(deps), platform.to_owned(), model.clone());
    match tokio::task::spawn_blocking(move || shared.system_prompt_for(&name, &chosen)).await {
        Ok(prompt) => prompt,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The blocking pool is shutting down: build it here instead.
        Err(_) => deps.system_prompt_for(platform, &model),
    }
}

fn assistant_from(reply: &ModelReply) -> ChatMessage {
    let mut message = ChatMessage::assistant(reply.content.clone().unwrap_or_default());
    if reply.content.is_none() {
        message.content = None;
    }
    message.tool_calls = reply.tool_calls.clone();
    message.reasoning = reply.reasoning.clone();
    message
}
