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

/// Arguments that name no task to run; the text is the error the model reads.
#[derive(Debug, thiserror::Error)]
pub enum BadDelegation {
    #[error("Give 'goal' for one task or 'tasks' for several.")]
    NoGoal,
    /// `kind` is the Python type name of what the JSON string held.
    #[error("tasks needs a JSON array with one object per task, not a {kind}.")]
    TasksNotAnArray { kind: &'static str },
    #[error(
        "tasks needs a JSON array with one object per task; this string is not valid JSON ({0})."
    )]
    TasksNotJson(#[source] serde_json::Error),
    #[error(
        "{count} tasks is more than the {limit} allowed at once (delegation.max_concurrent_children in config.yaml). Send fewer, or spread them over several delegate_task calls."
    )]
    TooManyTasks { count: usize, limit: usize },
    #[error("Task {index} is not an object ({kind}); give each task as an object with a goal.")]
    TaskNotAnObject { index: usize, kind: &'static str },
    #[error("Task {index} is missing a 'goal'.")]
    TaskWithoutGoal { index: usize },
}

impl BadDelegation {
    /// The tool result the model gets instead of any child running.
    pub fn tool_result(&self) -> String {
        tool_error(self.to_string())
    }
}

impl DelegateArgs {
    /// Parses model arguments. `tasks` given as a JSON string is accepted, as models
    /// sometimes send it that way.
    pub fn parse(args: &Value, limits: &DelegationLimits) -> Result<Self, BadDelegation> {
        let top_role = Role::parse(args.get("role"));
        let tasks = match args.get("tasks") {
            Some(Value::String(raw)) => {
                let raw = raw.trim();
                if raw.is_empty() {
                    return Err(BadDelegation::NoGoal);
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
                        return Err(BadDelegation::TasksNotAnArray { kind });
                    }
                    Err(e) => return Err(BadDelegation::TasksNotJson(e)),
                }
            }
            Some(Value::Array(items)) if !items.is_empty() => Some(items.clone()),
            _ => None,
        };
        let raw_tasks: Vec<Value> = match tasks {
            Some(items) => {
                if items.len() > limits.max_concurrent_children {
                    return Err(BadDelegation::TooManyTasks {
                        count: items.len(),
                        limit: limits.max_concurrent_children,
                    });
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
                None => return Err(BadDelegation::NoGoal),
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
                return Err(BadDelegation::TaskNotAnObject { index: i, kind });
            };
            let goal = obj
                .get("goal")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim();
            if goal.is_empty() {
                return Err(BadDelegation::TaskWithoutGoal { index: i });
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
            "Nesting is on (max_spawn_depth={depth}): a child given role='orchestrator' may delegate in turn, {} level(s) further down.",
            depth - 1
        )
    } else if depth >= 2 {
        format!(
            "Nesting is off here (delegation.orchestrator_enabled=false, max_spawn_depth={depth}): every child runs as 'leaf' whatever role you ask for."
        )
    } else {
        format!(
            "Nesting is off (max_spawn_depth={depth}): every child runs as 'leaf' and cannot delegate. delegation.max_spawn_depth in config.yaml turns it on."
        )
    }
}

fn role_note(limits: &DelegationLimits) -> String {
    let depth = limits.max_spawn_depth;
    if depth >= 2 && limits.orchestrator_enabled {
        format!(
            "Nesting is on (max_spawn_depth={depth}): an orchestrator child may delegate {} level(s) further down.",
            depth - 1
        )
    } else if depth >= 2 {
        "Nesting is off here (delegation.orchestrator_enabled=false): 'orchestrator' runs as 'leaf'.".to_owned()
    } else {
        format!("Nesting is off (max_spawn_depth={depth}): 'orchestrator' runs as 'leaf'.")
    }
}

/// The schema with the configured limits in its text.
pub fn schema(limits: &DelegationLimits) -> Value {
    let children = limits.max_concurrent_children;
    let depth = limits.max_spawn_depth;
    let description = format!(
        "Hands work to child agents, each with a fresh context, its own terminal session and its own tools; only each child's final summary comes back (an array, one entry per task), so its intermediate tool output never fills your context.\n\nEither 'goal' (one task, with optional 'context' and 'role') or 'tasks' (up to {children} run in parallel, delegation.max_concurrent_children). {}\n\nWorth it for heavy reasoning (debugging, review, research), for work that would produce a lot of intermediate output, and for independent parallel work. Not for a single tool call (make it yourself) or anything needing the user (children cannot use clarify).\n\nChildren know nothing of this conversation: put every needed fact in 'context', including the language and tone to answer in (they default to English). Their summaries are claims, not proof: for side effects elsewhere (uploads, remote writes, publishing) ask for a checkable handle (URL, id, path, status) and check it before telling the user it worked. A 'leaf' (default) cannot call delegate_task, clarify or memory; an 'orchestrator' keeps delegate_task but not clarify or memory, and is limited by max_spawn_depth={depth} and delegation.orchestrator_enabled.",
        nesting_clause(limits)
    );
    json!({
        "name": "delegate_task",
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                "goal": {"type": "string", "description": "The task, stated completely: the child has not seen this conversation."},
                "context": {"type": "string", "description": "Facts the child needs: paths, error text, constraints, the language and tone to answer in."},
                "tasks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "goal": {"type": "string", "description": "Task goal"},
                            "context": {"type": "string", "description": "Task-specific context"},
                            "role": {"type": "string", "enum": ["leaf", "orchestrator"], "description": "This task's role; overrides the top-level role."}
                        },
                        "required": ["goal"]
                    },
                    "description": format!("Several tasks run in parallel, at most {children} (delegation.max_concurrent_children), each by its own child. When given, top-level goal, context and role are ignored.")
                },
                "role": {
                    "type": "string",
                    "enum": ["leaf", "orchestrator"],
                    "description": format!("'leaf' (default): does the work and cannot delegate. 'orchestrator': may call delegate_task itself. {}", role_note(limits))
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
    fn invalid_calls_are_refused_with_a_reason() {
        let limits = DelegationLimits::default();
        let err = |v: Value| -> String {
            let e = DelegateArgs::parse(&v, &limits).unwrap_err().tool_result();
            serde_json::from_str::<Value>(&e).unwrap()["error"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            err(json!({})),
            "Give 'goal' for one task or 'tasks' for several."
        );
        assert!(
            err(json!({"tasks": [{"goal": "a"}, {"goal": "b"}, {"goal": "c"}, {"goal": "d"}]}))
                .starts_with("4 tasks is more than the 3 allowed at once")
        );
        assert_eq!(
            err(json!({"tasks": [{"context": "x"}]})),
            "Task 0 is missing a 'goal'."
        );
        assert!(err(json!({"tasks": "not json"})).starts_with(
            "tasks needs a JSON array with one object per task; this string is not valid JSON"
        ));
    }
}
