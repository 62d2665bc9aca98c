//! The shape of the settings table. One entry per setting declares its slot in `Config`, its
//! environment variable (a `pub const`, listed in `ENV_VARS`), its file key, the rule that reads
//! it on every path, its default (a value of its type: `defaults::Fallback`) and its meaning;
//! `table.rs` holds the one invocation.
//! Reading the environment (`env.rs`), reading the file (`file.rs`), checking every value
//! (`Slots::check_all`) and the configuration reference (`reference.rs`) all iterate the
//! entries it makes, and the setters take each setting's rule from it (`Rules`), so a new
//! setting is one entry plus its use (a getter, a setter, a field of `Settings`).
//!
//! An entry, after its doc comment (the meaning: the constant's documentation and the
//! reference's text):
//!
//! ```text
//! field: Type = RULE, DEFAULT                 (a `Fallback`: `Fallback::value(10)`, ...)
//!     , env VARIABLE                      (or `env NAME = crate::CONST`: another crate's name)
//!     , signals TRACES METRICS LOGS PROFILES  (a per-signal OTLP setting: one value per scope)
//!     , key "file.key" FileType (FILE_RULE) was "old.key"   (rule and old name optional)
//!     , merge function                    (merge into the value set before instead of replacing)
//!     , if feature = "gpu"                (the slot exists only in such builds)
//! ;
//! ```
//!
//! Each part after the default is optional. The getters and `resolve` read a default through
//! `Defaults::field`, and the reference writes its words from the same value. A per-signal setting's key is the part after
//! `otlp.`: `key "endpoint" Text` reads `otlp.endpoint` and `otlp.<signal>.endpoint`.

use super::rule::Redaction;
use pipetel_core::settings::{ConfigError, Origin};

/// The TOML type a file key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileType {
    /// No file key.
    Absent,
    Bool,
    /// A whole number.
    Int,
    /// A whole number in the key's unit, or a string in the duration grammar (`"1500ms"`).
    Duration,
    Text,
    /// A string or a number.
    Scalar,
    /// An array of strings or numbers.
    List,
    /// An array of numbers, or the name of a set of bucket bounds (`"telefuser"`).
    Buckets,
    /// A table of strings.
    Table,
    /// A boolean, or a string naming a mode (`"always"`).
    Switch,
}

/// Reads one value's text from an origin into its slot of `S`; the `usize` is the scope (0: the
/// generic value; 1, 2, 3: the traces, metrics and logs values of a per-signal setting).
pub(crate) type Read<S> = fn(&mut S, usize, &str, Origin) -> Result<(), ConfigError>;

/// One setting, as the table declares it.
pub(crate) struct Entry<S: 'static> {
    /// Its environment variables: none (file and code only), one, or the generic one and then
    /// the traces, metrics and logs ones of a per-signal setting.
    pub(crate) env: &'static [&'static str],
    /// Its file keys, in the same order as `env` for a per-signal setting.
    pub(crate) keys: &'static [&'static str],
    /// The key's old spelling, still read with a deprecation warning.
    pub(crate) old_key: Option<&'static str>,
    /// The TOML type the key takes.
    pub(crate) kind: FileType,
    /// The default, in the reference's words (Markdown), written from its value.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) default: fn() -> String,
    /// What it means (Markdown, one line per doc-comment line).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) meaning: &'static str,
    /// What errors may show of its values.
    pub(crate) redaction: Redaction,
    /// Reads the variable's text into the slot.
    pub(crate) read_env: Read<S>,
    /// Reads the file key's text (the TOML value made text) into the slot.
    pub(crate) read_file: Read<S>,
}

impl<S> Entry<S> {
    /// The scope (see [`Read`]) of each variable with its name.
    pub(crate) fn variables(&self) -> impl Iterator<Item = (usize, &'static str)> + '_ {
        self.env.iter().copied().enumerate()
    }

    /// The scope of each file key with the key.
    pub(crate) fn file_keys(&self) -> impl Iterator<Item = (usize, &'static str)> + '_ {
        self.keys.iter().copied().enumerate()
    }
}

/// Declares the settings: see the module's documentation for an entry's form.
macro_rules! settings_table {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $rule:ident, $default:expr
            $(, env $env:ident $(= $($gpu:ident)::+)?)?
            $(, signals $tenv:ident $menv:ident $lenv:ident $penv:ident)?
            $(, key $key:literal $kind:ident $(($krule:ident))? $(was $old:literal)?)?
            $(, merge $merge:ident)?
            $(, if $cfg:meta)?
        ;
    )*) => {
        $(
            $crate::config::declare::env_consts!(
                [$($doc)*] [$($key)?] [$($env $(= $($gpu)::+)?)?] [$($tenv $menv $lenv $penv)?]
            );
        )*

        /// Every environment variable pipetel reads, in the order of the configuration
        /// reference (`docs/src/configuration.md`).
        pub const ENV_VARS: &[&str] = &[$( $($env,)? $($tenv, $menv, $lenv, $penv,)? )*];

        /// Every setting's slot: unset, or its value, where it came from and its rule.
        #[derive(Debug, Clone, Default)]
        pub(crate) struct Slots {
            $(
                $(#[cfg($cfg)])?
                pub(crate) $field: $crate::config::declare::slot_type!($ty $(, $tenv)?),
            )*
        }

        /// Every setting's default, by the name of its slot: what the getters and `resolve` fall
        /// back on, and what the reference's words are written from.
        pub(crate) struct Defaults;

        #[allow(non_upper_case_globals)]
        impl Defaults {
            $(
                $(#[cfg($cfg)])?
                pub(crate) const $field: $crate::config::defaults::Fallback<
                    <$ty as $crate::config::defaults::Value>::Const,
                > = $default;
            )*
        }

        #[cfg(test)]
        impl Defaults {
            /// Every default's text read back through its setting's rule: a line per text that
            /// does not come back as the value, or value its rule refuses.
            pub(crate) fn mismatches() -> Vec<String> {
                let mut failures = Vec::new();
                $(
                    $(#[cfg($cfg)])?
                    $crate::config::defaults::round_trip::<$ty>(
                        stringify!($field), &Defaults::$field, Rules::$field, &mut failures,
                    );
                )*
                failures
            }
        }

        /// Every setting's rule, by the name of its slot: what a value set in code answers to.
        pub(crate) struct Rules;

        #[allow(non_upper_case_globals)]
        impl Rules {
            $(
                $(#[cfg($cfg)])?
                pub(crate) const $field: &'static $crate::config::rule::Rule<$ty> = &$rule;
            )*
        }

        impl Slots {
            /// Runs every set value's check; the first refusal is an error naming its origin.
            pub(crate) fn check_all(&self) -> Result<(), ::pipetel_core::settings::ConfigError> {
                $(
                    $(#[cfg($cfg)])?
                    $crate::config::rule::AnySlot::check_all(&self.$field)?;
                )*
                Ok(())
            }
        }

        /// The settings, in the order of the reference.
        pub(crate) static TABLE: &[$crate::config::declare::Entry<Slots>] = &[$(
            $crate::config::declare::Entry {
                env: &[$($env,)? $($tenv, $menv, $lenv, $penv,)?],
                keys: $crate::config::declare::keys!([$($key)?] [$($tenv)?]),
                old_key: $crate::config::declare::optional!($($($old)?)?),
                kind: $crate::config::declare::kind!($($kind)?),
                default: $crate::config::declare::gated!(
                    [$($cfg)?] || Defaults::$field.describe::<$ty>(), || String::from("—")
                ),
                meaning: concat!($($doc, "\n",)*),
                redaction: $crate::config::declare::gated!(
                    [$($cfg)?] Rules::$field.redaction, $crate::config::rule::Redaction::None
                ),
                read_env: $crate::config::declare::reader!(Slots, $field, Rules::$field, [$($merge)?], [$($cfg)?]),
                read_file: $crate::config::declare::reader!(
                    Slots, $field, $crate::config::declare::first!($($($krule,)?)? $rule,), [$($merge)?], [$($cfg)?]
                ),
            },
        )*];
    };
}
pub(crate) use settings_table;

/// The `pub const` of each variable an entry names, documented with its meaning and file key
/// (its default is in the reference: a doc attribute takes words, not a value); a variable
/// another crate owns is that crate's constant, re-exported.
macro_rules! env_consts {
    ([$($doc:literal)*] [$($key:literal)?] [] []) => {};
    ([$($doc:literal)*] [$($key:literal)?] [$env:ident] []) => {
        $(#[doc = $doc])*
        #[doc = ""]
        $(#[doc = concat!("File key: `", $key, "`.")])?
        pub const $env: &str = stringify!($env);
    };
    ([$($doc:literal)*] [$($key:literal)?] [$env:ident = $($gpu:ident)::+] []) => {
        #[cfg(feature = "gpu")]
        $(#[doc = $doc])*
        #[doc = ""]
        $(#[doc = concat!("File key: `", $key, "`.")])?
        pub use $($gpu)::+ as $env;
        #[cfg(not(feature = "gpu"))]
        $(#[doc = $doc])*
        #[doc = ""]
        $(#[doc = concat!("File key: `", $key, "`.")])?
        pub const $env: &str = stringify!($env);
    };
    ([$($doc:literal)*] [$key:literal] [$env:ident] [$t:ident $m:ident $l:ident $p:ident]) => {
        $(#[doc = $doc])*
        #[doc = ""]
        #[doc = concat!("For every signal; `", stringify!($t), "` and its siblings set one signal's, which beats it.")]
        #[doc = concat!("File key: `otlp.", $key, "`.")]
        pub const $env: &str = stringify!($env);
        $crate::config::declare::env_consts!(@signal $env $t "traces" $key);
        $crate::config::declare::env_consts!(@signal $env $m "metrics" $key);
        $crate::config::declare::env_consts!(@signal $env $l "logs" $key);
        $crate::config::declare::env_consts!(@signal $env $p "profiles" $key);
    };
    (@signal $env:ident $name:ident $signal:literal $key:literal) => {
        #[doc = concat!("As [`", stringify!($env), "`], for ", $signal, " only; it beats that one.")]
        #[doc = ""]
        #[doc = concat!("File key: `otlp.", $signal, ".", $key, "`.")]
        pub const $name: &str = stringify!($name);
    };
}
pub(crate) use env_consts;

/// A slot: one value, or one per scope for a per-signal setting.
macro_rules! slot_type {
    ($ty:ty) => { $crate::config::rule::One<$ty> };
    ($ty:ty, $signals:ident) => { $crate::config::rule::PerSignal<$ty> };
}
pub(crate) use slot_type;

/// The file keys of an entry.
macro_rules! keys {
    ([] [$($signals:ident)?]) => {
        &[]
    };
    ([$key:literal] []) => {
        &[$key]
    };
    ([$key:literal] [$signals:ident]) => {
        &[
            concat!("otlp.", $key),
            concat!("otlp.traces.", $key),
            concat!("otlp.metrics.", $key),
            concat!("otlp.logs.", $key),
            concat!("otlp.profiles.", $key),
        ]
    };
}
pub(crate) use keys;

macro_rules! kind {
    () => {
        $crate::config::declare::FileType::Absent
    };
    ($kind:ident) => {
        $crate::config::declare::FileType::$kind
    };
}
pub(crate) use kind;

macro_rules! optional {
    () => {
        None
    };
    ($value:expr) => {
        Some($value)
    };
}
pub(crate) use optional;

/// The first of its arguments (a file key's own rule, else the setting's).
macro_rules! first {
    ($first:ident, $($rest:ident,)*) => {
        $first
    };
}
pub(crate) use first;

/// `value` in builds where `cfg` holds (or in all, without one), `otherwise` in the others.
macro_rules! gated {
    ([] $value:expr, $otherwise:expr) => {
        $value
    };
    ([$cfg:meta] $value:expr, $otherwise:expr) => {{
        #[cfg($cfg)]
        let value = $value;
        #[cfg(not($cfg))]
        let value = $otherwise;
        value
    }};
}
pub(crate) use gated;

/// A reader: the text through `rule` into the slot of the scope, replacing the value there (or
/// merged into it). Without the entry's feature the value is ignored, as one file serves every
/// build.
macro_rules! reader {
    ($slots:ident, $field:ident, $rule:expr, [$($merge:ident)?], [$($cfg:meta)?]) => {
        $crate::config::declare::gated!(
            [$($cfg)?]
            |s: &mut $slots, scope: usize, text: &str, origin: ::pipetel_core::settings::Origin|
                -> Result<(), ::pipetel_core::settings::ConfigError> {
                let set = $rule.read(text, origin)?;
                let slot = $crate::config::rule::AnySlot::at(&mut s.$field, scope);
                $crate::config::declare::store!([$($merge)?] slot, set);
                Ok(())
            },
            |_: &mut $slots, _: usize, _: &str, _: ::pipetel_core::settings::Origin|
                -> Result<(), ::pipetel_core::settings::ConfigError> { Ok(()) }
        )
    };
}
pub(crate) use reader;

macro_rules! store {
    ([] $slot:ident, $set:ident) => {
        *$slot = Some($set)
    };
    ([$merge:ident] $slot:ident, $set:ident) => {
        $merge($slot, $set)
    };
}
pub(crate) use store;
