//! The `-o` formats of the get commands.

use serde::Serialize;

use crate::error::Error;

/// How a get command prints what it found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text, for people.
    #[default]
    #[value(name = "table")]
    Table,
    /// JSON, for programs.
    #[value(name = "json")]
    Json,
    /// YAML.
    #[value(name = "yaml")]
    Yaml,
}

impl Format {
    /// `value` as JSON or YAML (a table is rendered by each command itself; asked here, it
    /// gets JSON).
    pub fn render<T: Serialize>(self, value: &T) -> Result<String, Error> {
        match self {
            Self::Yaml => {
                serde_saphyr::to_string(value).map_err(|error| Error::Output(error.to_string()))
            }
            Self::Json | Self::Table => serde_json::to_string_pretty(value)
                .map(|json| json + "\n")
                .map_err(|error| Error::Output(error.to_string())),
        }
    }
}
