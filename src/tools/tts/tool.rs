//! The settings the `text_to_speech` tool and the gateway's spoken replies share. The tool's
//! registry entry is `tools/tts_entry.rs`, beside this module, so the tool context can hold
//! these settings without an import circle.

use hermes_adapter::net::NetSettings;

use crate::config::SpeechConfig;

/// What the tool and the gateway's spoken replies need: the `tts:`/`voice:` settings and the
/// network settings (proxy, CAs) every outbound client shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpeechSettings {
    pub config: SpeechConfig,
    pub network: NetSettings,
}

impl SpeechSettings {
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self {
            config: config.speech.clone(),
            network: config.network.clone(),
        }
    }
}
