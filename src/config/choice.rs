//! Keyword-valued settings (`approvals.mode: manual`): parsed from their lowercase names and
//! shown as those names.

use std::fmt;

use serde::Serialize;

/// A keyword-valued setting: parsed from its lowercase name, shown as that name.
pub trait Choice: Sized + Copy + 'static {
    const NAMES: &'static [&'static str];
    fn from_name(name: &str) -> Option<Self>;
    /// What a bare YAML boolean means for this setting, if anything (`mode: off` written for
    /// PyYAML arrives as `false`).
    fn from_bool(_value: bool) -> Option<Self> {
        None
    }
}

macro_rules! choice {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }
     $(bools($on:ident, $off:ident))?) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl Choice for $name {
            const NAMES: &'static [&'static str] = &[$($text),+];
            fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }
            $(fn from_bool(value: bool) -> Option<Self> {
                Some(if value { Self::$on } else { Self::$off })
            })?
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

choice!(
    /// The wire protocol of a model endpoint (`model.api_mode`, `fallback_providers[].api_mode`).
    ApiMode {
        ChatCompletions = "chat_completions",
        AnthropicMessages = "anthropic_messages",
        CodexResponses = "codex_responses",
    }
);
choice!(
    /// How dangerous commands are approved.
    ApprovalMode { Manual = "manual", Off = "off" } bools(Manual, Off)
);
choice!(
    /// When a session resets on its own.
    ResetMode { None = "none", Idle = "idle", Daily = "daily", Both = "both" }
);
choice!(
    /// What an unknown user's DM gets.
    UnauthorizedDmBehavior { Pair = "pair", Ignore = "ignore" }
);
choice!(
    /// How streamed text reaches the chat.
    StreamingTransport { Auto = "auto", Draft = "draft", Edit = "edit", Off = "off" } bools(Auto, Off)
);
choice!(
    /// What a message sent while the agent is busy does.
    BusyInputMode { Interrupt = "interrupt", Queue = "queue", Steer = "steer" }
);
choice!(
    /// How much tool activity is shown in the chat.
    ToolProgress { Off = "off", New = "new", All = "all", Verbose = "verbose" } bools(All, Off)
);
choice!(
    /// How a photo from a chat reaches the model (`agent.image_input_mode`).
    ImageInputMode { Auto = "auto", Native = "native", Text = "text" }
);
choice!(
    /// Which chunks of a multi-part reply quote the user's message.
    ReplyToMode { Off = "off", First = "first", All = "all" } bools(First, Off)
);

choice!(
    /// Where the state lives (`state.backend`).
    StateBackend { Sqlite = "sqlite", Postgres = "postgres" }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_round_trip_their_names() {
        for name in ToolProgress::NAMES {
            assert_eq!(ToolProgress::from_name(name).unwrap().as_str(), *name);
        }
        assert_eq!(ToolProgress::from_bool(false), Some(ToolProgress::Off));
        assert_eq!(ResetMode::from_bool(true), None);
        assert_eq!(
            BusyInputMode::from_name("steer"),
            Some(BusyInputMode::Steer)
        );
        assert_eq!(BusyInputMode::from_name("STEER"), None);
    }
}
