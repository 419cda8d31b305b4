//! Realistic, seeded chat messages for load tests and benchmarks: 200–800 characters, some
//! CJK, some assistant rows carrying tool-call JSON.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use hermesd::state::NewMessage;

/// The head of the vocabulary, most frequent first; synthetic words extend it to
/// [`VOCABULARY`] entries so word frequencies follow Zipf's law as in real chat text.
const HEAD: &[&str] = &[
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
    "this",
    "that",
    "with",
    "on",
    "be",
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
];
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ter", "pro", "dex", "vin", "sor", "lan", "qu", "zen", "bri", "tal", "mor",
    "fe", "nu", "gra", "pel", "sti", "ro",
];
pub const VOCABULARY: usize = 5000;

/// The word at Zipf rank `rank` (0 = most frequent).
pub fn word_at(rank: usize) -> String {
    if let Some(word) = HEAD.get(rank) {
        return (*word).to_owned();
    }
    let mut n = rank;
    let mut word = String::new();
    for _ in 0..3 {
        word.push_str(SYLLABLES[n % SYLLABLES.len()]);
        n /= SYLLABLES.len();
    }
    word
}

/// Common Chinese characters; CJK words are built from them by rank, two or three long.
const HANZI: &[char] = &[
    '的', '一', '是', '不', '了', '人', '我', '在', '有', '他', '这', '中', '大', '来', '上', '国',
    '个', '到', '说', '们', '为', '子', '和', '你', '地', '出', '道', '也', '时', '年', '部', '署',
    '环', '境', '数', '据', '库', '服', '务', '器', '配', '置', '错', '误', '超', '网', '络', '消',
    '息', '模', '型', '工', '具', '终', '端', '文', '件', '测', '试', '缓',
];

/// The CJK word at Zipf rank `rank`: even ranks have two characters, odd ranks three.
pub fn cjk_word_at(rank: usize) -> String {
    let length = if rank.is_multiple_of(2) { 2 } else { 3 };
    // Spread ranks over the character set so neighbouring ranks share no characters.
    let mut n = rank.wrapping_mul(7919).wrapping_add(13);
    (0..length)
        .map(|_| {
            let c = HANZI[n % HANZI.len()];
            n /= HANZI.len();
            c
        })
        .collect()
}
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
    words: Vec<String>,
    cjk_words: Vec<String>,
    /// Cumulative Zipf weights over `words` (and, by rank, over `cjk_words`).
    cumulative: Vec<f64>,
}

impl Workload {
    pub fn new(seed: u64) -> Self {
        let words: Vec<String> = (0..VOCABULARY).map(word_at).collect();
        let cjk_words: Vec<String> = (0..VOCABULARY).map(cjk_word_at).collect();
        let mut total = 0.0;
        let cumulative = (0..VOCABULARY)
            .map(|rank| {
                total += 1.0 / (rank as f64 + 1.0);
                total
            })
            .collect();
        Self {
            rng: StdRng::seed_from_u64(seed),
            words,
            cjk_words,
            cumulative,
        }
    }

    fn zipf_rank(&mut self) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let pick = self.rng.random_range(0.0..total);
        self.cumulative
            .partition_point(|c| *c < pick)
            .min(self.words.len() - 1)
    }

    /// Text of 200–800 characters; about one message in five is mostly Chinese.
    pub fn text(&mut self) -> String {
        let target = self.rng.random_range(200..=800);
        let cjk = self.rng.random_bool(0.2);
        let mut out = String::with_capacity(target * 3);
        let mut chars = 0;
        while chars < target {
            let rank = self.zipf_rank();
            let word = if cjk && self.rng.random_bool(0.7) {
                self.cjk_words[rank].clone()
            } else {
                self.words[rank].clone()
            };
            out.push_str(&word);
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
