//! Realistic, seeded chat messages for load tests and benchmarks: 200–800 characters, some
//! CJK, some assistant rows carrying tool-call JSON.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use hermesd::state::NewMessage;

const WORDS: &[&str] = &[
    "deploy",
    "docker",
    "container",
    "kubernetes",
    "staging",
    "production",
    "database",
    "migration",
    "error",
    "timeout",
    "retry",
    "config",
    "server",
    "client",
    "request",
    "response",
    "latency",
    "memory",
    "cache",
    "index",
    "search",
    "query",
    "session",
    "token",
    "gateway",
    "telegram",
    "discord",
    "slack",
    "agent",
    "model",
    "tool",
    "terminal",
    "file",
    "patch",
    "build",
    "release",
    "test",
    "benchmark",
    "network",
    "socket",
    "the",
    "a",
    "to",
    "and",
    "of",
    "in",
    "is",
    "it",
    "for",
    "we",
    "should",
    "could",
    "please",
    "check",
    "fix",
];
const CJK: &[&str] = &[
    "部署",
    "环境",
    "数据库",
    "服务器",
    "配置",
    "错误",
    "超时",
    "重试",
    "内存",
    "缓存",
    "索引",
    "搜索",
    "会话",
    "模型",
    "工具",
    "终端",
    "文件",
    "测试",
    "网络",
    "消息",
];
const TOOLS: &[&str] = &[
    "terminal",
    "read_file",
    "write_file",
    "patch",
    "search_files",
];

/// A deterministic message generator; the same seed gives the same stream.
pub struct Workload {
    rng: StdRng,
}

impl Workload {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Text of 200–800 characters; about one message in five is mostly Chinese.
    pub fn text(&mut self) -> String {
        let target = self.rng.random_range(200..=800);
        let cjk = self.rng.random_bool(0.2);
        let mut out = String::with_capacity(target * 3);
        let mut chars = 0;
        while chars < target {
            let word = if cjk && self.rng.random_bool(0.7) {
                CJK[self.rng.random_range(0..CJK.len())]
            } else {
                WORDS[self.rng.random_range(0..WORDS.len())]
            };
            out.push_str(word);
            chars += word.chars().count();
            if !cjk || self.rng.random_bool(0.3) {
                out.push(' ');
                chars += 1;
            }
        }
        out
    }

    /// The next message for `session_id`: user, assistant, or assistant with tool calls.
    pub fn message(&mut self, session_id: &str) -> NewMessage {
        let roll = self.rng.random_range(0..10);
        let role = if roll < 5 { "user" } else { "assistant" };
        let mut message = NewMessage::text(session_id, role, &self.text());
        if roll >= 8 {
            let tool = TOOLS[self.rng.random_range(0..TOOLS.len())];
            let call_id = format!("call_{:08x}", self.rng.random::<u32>());
            message.tool_calls = Some(json!([{
                "id": call_id,
                "type": "function",
                "function": {"name": tool, "arguments": json!({"command": self.text()}).to_string()}
            }]));
            message.finish_reason = Some("tool_calls".into());
        }
        message
    }
}
