//! [`Configs`]: which of TensorFlow's built-in Grappler passes a plugin wants turned off.
//!
//! The field names and [`TriState`] are `unbound-grappler-abi`'s ([`crate::abi::config_fields!`]),
//! shared with the host that reads what this crate writes.

pub use crate::abi::TriState;
use crate::abi::CONFIG_FIELD_COUNT;

macro_rules! configs_struct {
    ($($field:ident),*) => {
        /// The tri-states of `TP_OptimizerConfigs`, one field per built-in pass, named and
        /// ordered exactly as the C struct's fields ([`crate::abi::CONFIG_FIELDS`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct Configs {
            $(
                #[doc = concat!("`", stringify!($field), "`.")]
                pub $field: TriState,
            )*
        }

        impl Configs {
            /// Everything `Default` (usable in constants, unlike `Default::default`).
            pub const DEFAULT: Configs = Configs {
                $($field: TriState::Default,)*
            };

            /// The raw words of the TensorFlow 2.10+ layout, in field order.
            pub fn to_raw(&self) -> [u32; CONFIG_FIELD_COUNT] {
                [$(self.$field.to_raw()),*]
            }
        }
    };
}

crate::abi::config_fields!(configs_struct);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_order_follows_the_c_struct() {
        let c = Configs {
            remapping: TriState::Off,
            disable_model_pruning: TriState::On,
            scoped_allocator_optimization: TriState::Off,
            auto_mixed_precision_onednn_bfloat16: TriState::Off,
            ..Configs::DEFAULT
        };
        let raw = c.to_raw();
        // Byte offsets from grappler.h: 16 + 4 * index.
        assert_eq!(raw[0], 2); // 16 disable_model_pruning
        assert_eq!(raw[(52 - 16) / 4], 1); // 52 auto_mixed_precision_onednn_bfloat16
        assert_eq!(raw[(68 - 16) / 4], 1); // 68 remapping
        assert_eq!(raw[(88 - 16) / 4], 1); // 88 scoped_allocator_optimization
        assert_eq!(raw.iter().filter(|&&v| v == 0).count(), 15);
        assert_eq!(Configs::default(), Configs::DEFAULT);
        let invalid = Configs {
            debug_stripper: TriState::Invalid(7),
            ..Configs::DEFAULT
        };
        assert_eq!(invalid.to_raw()[5], 7);
    }
}
