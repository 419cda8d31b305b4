//! `delegate_task` (Python `tools/delegate_tool.py`): the schema, whose text states the
//! configured limits, and argument parsing into [`DelegateArgs`]. The agent loop runs the
//! sub-agents; this module only says what was asked for.

use serde_json::{Value, json};

use super::tool_error;

/// Parallel children per call unless configured (`delegation.max_concurrent_children`).
pub const DEFAULT_MAX_CONCURRENT_CHILDREN: usize = 3;
/// Flat by default: a child cannot delegate further (`delegation.max_spawn_depth`).
pub const DEFAULT_MAX_SPAWN_DEPTH: usize = 1;
/// Iterations a child gets (`delegation.max_iterations`).
pub const DEFAULT_MAX_ITERATIONS: usize = 50;

/// What may be delegated, from config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelegationLimits {
    pub max_concurrent_children: usize,
    pub max_spawn_depth: usize,
    pub orchestrator_enabled: bool,
}

impl Default for DelegationLimits {
    fn default() -> Self {
        Self {
            max_concurrent_children: DEFAULT_MAX_CONCURRENT_CHILDREN,
            max_spawn_depth: DEFAULT_MAX_SPAWN_DEPTH,
            orchestrator_enabled: true,
        }
    }
}

/// Whether a child may delegate further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leaf,
    Orchestrator,
}

impl Role {
    /// `None`, empty or unknown → leaf, as Python's `_normalize_role`.
    fn parse(value: Option<&Value>) -> Self {
        match value
            .and_then(Value::as_str)
            .map(|s| s.trim().to_lowercase())
        {
            Some(r) if r == "orchestrator" => Role::Orchestrator,
            _ => Role::Leaf,
        }
    }
}

/// One sub-agent task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegateTask {
    pub goal: String,
    pub context: Option<String>,
    pub role: Role,
}

/// The parsed call: one or more tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegateArgs {
    pub tasks: Vec<DelegateTask>,
}

impl DelegateArgs {
    /// Parses model arguments; the error is the tool result to return (Python texts).
    /// `tasks` given as a JSON string is accepted, as models sometimes send it that way.
    pub fn parse(args: &Value, limits: &DelegationLimits) -> Result<Self, String> {
        let top_role = Role::parse(args.get("role"));
        let tasks = match args.get("tasks") {
            Some(Value::String(raw)) => {
                let raw = raw.trim();
                if raw.is_empty() {
                    return Err(tool_error(
                        "Provide either 'goal' (single task) or 'tasks' (batch).",
                    ));
                }
                match serde_json::from_str::<Value>(raw) {
                    Ok(Value::Array(items)) => Some(items),
                    Ok(other) => {
                        let kind = match other {
                            Value::Object(_) => "dict",
                            Value::String(_) => "str",
                            Value::Number(_) => "int",
                            Value::Bool(_) => "bool",
                            _ => "NoneType",
                        };
                        return Err(tool_error(format!(
                            "tasks must be a JSON array of task objects; parsed {kind} instead."
                        )));
                    }
                    Err(e) => {
                        return Err(tool_error(format!(
                            "tasks must be a JSON array of task objects; received a string that could not be parsed as JSON ({e})."
                        )));
                    }
                }
            }
            Some(Value::Array(items)) if !items.is_empty() => Some(items.clone()),
            _ => None,
        };
        let raw_tasks: Vec<Value> = match tasks {
            Some(items) => {
                if items.len() > limits.max_concurrent_children {
                    return Err(tool_error(format!(
                        "Too many tasks: {} provided, but max_concurrent_children is {}. Either reduce the task count, split into multiple delegate_task calls, or increase delegation.max_concurrent_children in config.yaml.",
                        items.len(),
                        limits.max_concurrent_children
                    )));
                }
                items
            }
            None => match args
                .get("goal")
                .and_then(Value::as_str)
                .filter(|g| !g.trim().is_empty())
            {
                Some(goal) => vec![
                    json!({"goal": goal, "context": args.get("context"), "role": args.get("role")}),
                ],
                None => {
                    return Err(tool_error(
                        "Provide either 'goal' (single task) or 'tasks' (batch).",
                    ));
                }
            },
        };
        let mut tasks = Vec::with_capacity(raw_tasks.len());
        for (i, task) in raw_tasks.iter().enumerate() {
            let Some(obj) = task.as_object() else {
                let kind = if task.is_string() {
                    "str"
                } else {
                    "non-object"
                };
                return Err(tool_error(format!(
                    "Task {i} must be an object, got {kind}."
                )));
            };
            let goal = obj
                .get("goal")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim();
            if goal.is_empty() {
                return Err(tool_error(format!("Task {i} is missing a 'goal'.")));
            }
            let role = match obj.get("role") {
                Some(Value::Null) | None => top_role,
                some => Role::parse(some),
            };
            // Nesting needs depth >= 2 and the orchestrator switch on; otherwise leaf.
            let role = if limits.max_spawn_depth >= 2 && limits.orchestrator_enabled {
                role
            } else {
                Role::Leaf
            };
            tasks.push(DelegateTask {
                goal: goal.to_owned(),
                context: obj
                    .get("context")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .filter(|c| !c.is_empty()),
                role,
            });
        }
        Ok(Self { tasks })
    }
}

fn nesting_clause(limits: &DelegationLimits) -> String {
    let depth = limits.max_spawn_depth;
    if depth >= 2 && limits.orchestrator_enabled {
        format!(
            "Nested delegation IS enabled for this user (max_spawn_depth={depth}): pass role='orchestrator' on a child to let it spawn its own workers, up to {} additional level(s) deep.",
            depth - 1
        )
    } else if depth >= 2 {
        format!(
            "Nested delegation is DISABLED on this install (delegation.orchestrator_enabled=false), even though max_spawn_depth={depth}. role='orchestrator' is silently forced to 'leaf'."
        )
    } else {
        format!(
            "Nested delegation is OFF for this user (max_spawn_depth={depth}): every child is a leaf and cannot delegate further. Raise delegation.max_spawn_depth in config.yaml to enable nesting."
        )
    }
}

fn role_note(limits: &DelegationLimits) -> String {
    let depth = limits.max_spawn_depth;
    if depth >= 2 && limits.orchestrator_enabled {
        format!(
            "Nesting IS enabled for this user (max_spawn_depth={depth}): orchestrator children can themselves delegate up to {} more level(s) deep.",
            depth - 1
        )
    } else if depth >= 2 {
        "Nesting is currently disabled (delegation.orchestrator_enabled=false); 'orchestrator' is silently forced to 'leaf'.".to_owned()
    } else {
        format!(
            "Nesting is OFF for this user (max_spawn_depth={depth}); 'orchestrator' is silently forced to 'leaf'. Raise delegation.max_spawn_depth in config.yaml to enable."
        )
    }
}

/// The schema with the configured limits in its text.
pub fn schema(limits: &DelegationLimits) -> Value {
    let children = limits.max_concurrent_children;
    let depth = limits.max_spawn_depth;
    let description = format!(
        "Spawn one or more subagents to work on tasks in isolated contexts. Each subagent gets its own conversation, terminal session, and toolset. Only the final summary is returned -- intermediate tool results never enter your context window.\n\nTWO MODES (one of 'goal' or 'tasks' is required):\n1. Single task: provide 'goal' (+ optional context and role).\n2. Batch (parallel): provide 'tasks' array with up to {children} items concurrently for this user (configured via delegation.max_concurrent_children in config.yaml). {}\n\nWHEN TO USE delegate_task:\n- Reasoning-heavy subtasks (debugging, code review, research synthesis)\n- Tasks that would flood your context with intermediate data\n- Parallel independent workstreams (research A and B simultaneously)\n\nWHEN NOT TO USE (use these instead):\n- Single tool call -> just call the tool directly\n- Tasks needing user interaction -> subagents cannot use clarify\n\nIMPORTANT:\n- Subagents have NO memory of your conversation. Pass all relevant info (file paths, error messages, constraints) via the 'context' field.\n- If the user is writing in a non-English language, or asked for output in a specific language / tone / style, say so in 'context' (e.g. \"respond in Chinese\", \"return output in Japanese\"). Otherwise subagents default to English and their summaries will contaminate your final reply with the wrong language.\n- Subagent summaries are SELF-REPORTS, not verified facts. A subagent that claims \"uploaded successfully\" or \"file written\" may be wrong. For operations with external side-effects (HTTP POST/PUT, remote writes, file creation at shared paths, publishing), require the subagent to return a verifiable handle (URL, ID, absolute path, HTTP status) and verify it yourself — fetch the URL, stat the file, read back the content — before telling the user the operation succeeded.\n- Leaf subagents (role='leaf', the default) CANNOT call: delegate_task, clarify, memory.\n- Orchestrator subagents (role='orchestrator') retain delegate_task so they can spawn their own workers, but still cannot use clarify or memory. Orchestrators are bounded by max_spawn_depth={depth} for this user and can be disabled globally via delegation.orchestrator_enabled=false.\n- Each subagent gets its own terminal session (separate working directory and state).\n- Results are always returned as an array, one entry per task.",
        nesting_clause(limits)
    );
    json!({
        "name": "delegate_task",
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                "goal": {"type": "string", "description": "What the subagent should accomplish. Be specific and self-contained -- the subagent knows nothing about your conversation history."},
                "context": {"type": "string", "description": "Background information the subagent needs: file paths, error messages, project structure, constraints. The more specific you are, the better the subagent performs."},
                "tasks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "goal": {"type": "string", "description": "Task goal"},
                            "context": {"type": "string", "description": "Task-specific context"},
                            "role": {"type": "string", "enum": ["leaf", "orchestrator"], "description": "Per-task role override. See top-level 'role' for semantics."}
                        },
                        "required": ["goal"]
                    },
                    "description": format!("Batch mode: tasks to run in parallel (up to {children} for this user, set via delegation.max_concurrent_children). Each gets its own subagent with isolated context and terminal session. When provided, top-level goal/context/role are ignored.")
                },
                "role": {
                    "type": "string",
                    "enum": ["leaf", "orchestrator"],
                    "description": format!("Role of the child agent. 'leaf' (default) = focused worker, cannot delegate further. 'orchestrator' = can use delegate_task to spawn its own workers. {}", role_note(limits))
                }
            },
            "required": []
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_batch_forms_parse() {
        let limits = DelegationLimits::default();
        let single = DelegateArgs::parse(
            &json!({"goal": " fix it ", "context": "ctx", "role": "orchestrator"}),
            &limits,
        )
        .unwrap();
        assert_eq!(
            single.tasks,
            vec![DelegateTask {
                goal: "fix it".into(),
                context: Some("ctx".into()),
                role: Role::Leaf
            }]
        );
        let batch = DelegateArgs::parse(
            &json!({"tasks": "[{\"goal\": \"a\"}, {\"goal\": \"b\"}]"}),
            &limits,
        )
        .unwrap();
        assert_eq!(batch.tasks.len(), 2);
        let nested = DelegationLimits {
            max_spawn_depth: 2,
            ..limits
        };
        let orch =
            DelegateArgs::parse(&json!({"goal": "x", "role": "orchestrator"}), &nested).unwrap();
        assert_eq!(orch.tasks[0].role, Role::Orchestrator);
    }

    #[test]
    fn invalid_calls_return_the_python_errors() {
        let limits = DelegationLimits::default();
        let err = |v: Value| -> String {
            let e = DelegateArgs::parse(&v, &limits).unwrap_err();
            serde_json::from_str::<Value>(&e).unwrap()["error"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            err(json!({})),
            "Provide either 'goal' (single task) or 'tasks' (batch)."
        );
        assert!(
            err(json!({"tasks": [{"goal": "a"}, {"goal": "b"}, {"goal": "c"}, {"goal": "d"}]}))
                .starts_with("Too many tasks: 4 provided")
        );
        assert_eq!(
            err(json!({"tasks": [{"context": "x"}]})),
            "Task 0 is missing a 'goal'."
        );
        assert!(
            err(json!({"tasks": "not json"}))
                .starts_with("tasks must be a JSON array of task objects; received a string")
        );
    }
}
