//! The plugin's recommendations for TensorFlow's built-in optimizers (`TP_OptimizerConfigs`),
//! read in either layout, and combined across plugins the way TensorFlow's meta optimizer
//! combines them (`GetPluginConfigs`): a plugin can only turn built-ins off, any plugin that
//! turns one off wins, and `disable_model_pruning` is on if any plugin turns it on.
//!
//! The field names, [`TriState`] and the two [`ConfigsLayout`]s are `unbound-grappler-abi`'s
//! (shared with the SDK, which writes what this module reads); they are re-exported here.

use std::fmt;

pub use crate::abi::{ConfigsLayout, TriState};
use crate::abi::{TpOptimizerConfigs, CONFIG_FIELDS, CONFIG_FIELD_COUNT};

/// One plugin's configs: a tri-state per field of [`CONFIG_FIELDS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfigs {
    /// The layout the plugin used.
    pub layout: ConfigsLayout,
    /// Values in [`CONFIG_FIELDS`] order (the old layout's missing field reads as Default).
    pub values: [TriState; CONFIG_FIELD_COUNT],
}

impl PluginConfigs {
    /// Reads the struct the plugin filled in; `struct_size` 88 selects the old layout.
    pub fn read(raw: &TpOptimizerConfigs) -> Self {
        let layout = ConfigsLayout::from_struct_size(raw.struct_size);
        let mut values = [TriState::Default; CONFIG_FIELD_COUNT];
        for (i, value) in values.iter_mut().enumerate() {
            let word = layout.word(i).map(|w| raw.toggles[w]);
            *value = word.map_or(TriState::Default, TriState::from_raw);
        }
        Self { layout, values }
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<TriState> {
        CONFIG_FIELDS
            .iter()
            .position(|f| *f == name)
            .map(|i| self.values[i])
    }
}

/// What TensorFlow's built-in optimizers become with these plugins loaded (user config all on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CombinedConfigs {
    /// True when some plugin turned `disable_model_pruning` on.
    pub disable_model_pruning: bool,
    /// For each built-in toggle turned off: its name and the plugins that turned it off.
    pub turned_off: Vec<(String, Vec<String>)>,
    /// TensorFlow's "Plugins have conflicting configs" cases: a toggle one plugin turns off and
    /// another explicitly turns on.
    pub conflicts: Vec<String>,
    /// Fields with values outside the tri-state enum, per plugin.
    pub invalid: Vec<String>,
}

/// Combines the configs of `plugins` (name, configs), as `GetPluginConfigs` does.
pub fn combine(plugins: &[(String, &PluginConfigs)]) -> CombinedConfigs {
    let mut combined = CombinedConfigs {
        disable_model_pruning: false,
        turned_off: Vec::new(),
        conflicts: Vec::new(),
        invalid: Vec::new(),
    };
    for (i, field) in CONFIG_FIELDS.iter().enumerate() {
        let by = |state: TriState| -> Vec<String> {
            plugins
                .iter()
                .filter(|(_, c)| c.values[i] == state)
                .map(|(n, _)| n.clone())
                .collect()
        };
        for (name, configs) in plugins {
            if let TriState::Invalid(v) = configs.values[i] {
                combined
                    .invalid
                    .push(format!("{name}: {field} has value {v}, not a TF_TriState"));
            }
        }
        if i == 0 {
            combined.disable_model_pruning = !by(TriState::On).is_empty();
            continue;
        }
        let off = by(TriState::Off);
        if off.is_empty() {
            continue;
        }
        let on = by(TriState::On);
        if !on.is_empty() {
            combined.conflicts.push(format!(
                "{field}: turned off by {} but on by {}; off wins",
                off.join(", "),
                on.join(", ")
            ));
        }
        combined.turned_off.push((field.to_string(), off));
    }
    combined
}

impl fmt::Display for CombinedConfigs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.disable_model_pruning {
            writeln!(f, "disable_model_pruning: on")?;
        }
        for (field, by) in &self.turned_off {
            writeln!(f, "{field}: off ({})", by.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{TRI_STATE_OFF, TRI_STATE_ON};

    fn raw(struct_size: usize, set: &[(usize, u32)]) -> TpOptimizerConfigs {
        let mut c = TpOptimizerConfigs {
            struct_size,
            ext: std::ptr::null_mut(),
            toggles: [0; CONFIG_FIELD_COUNT],
        };
        for &(i, v) in set {
            c.toggles[i] = v;
        }
        c
    }

    #[test]
    fn reads_both_layouts() {
        // remapping is word 13 in the current layout, word 12 in the old one.
        let current = PluginConfigs::read(&raw(92, &[(13, TRI_STATE_OFF)]));
        assert_eq!(current.layout, ConfigsLayout::Current);
        assert_eq!(current.get("remapping"), Some(TriState::Off));
        assert_eq!(current.get("layout_optimizer"), Some(TriState::Default));
        let old = PluginConfigs::read(&raw(88, &[(12, TRI_STATE_OFF), (17, TRI_STATE_OFF)]));
        assert_eq!(old.layout, ConfigsLayout::Before2_10);
        assert_eq!(old.get("remapping"), Some(TriState::Off));
        assert_eq!(
            old.get("scoped_allocator_optimization"),
            Some(TriState::Off)
        );
        assert_eq!(
            old.get("auto_mixed_precision_onednn_bfloat16"),
            Some(TriState::Default)
        );
    }

    #[test]
    fn off_wins_and_conflicts_are_reported() {
        let a = PluginConfigs::read(&raw(92, &[(13, TRI_STATE_OFF), (0, TRI_STATE_ON)]));
        let b = PluginConfigs::read(&raw(92, &[(13, TRI_STATE_ON), (6, 7)]));
        let c = combine(&[("a.so".into(), &a), ("b.so".into(), &b)]);
        assert!(c.disable_model_pruning);
        assert_eq!(
            c.turned_off,
            vec![("remapping".to_string(), vec!["a.so".to_string()])]
        );
        assert_eq!(c.conflicts.len(), 1);
        assert!(c.conflicts[0].contains("remapping"));
        assert_eq!(c.invalid.len(), 1);
        assert!(c.to_string().contains("remapping: off (a.so)"));
    }
}
