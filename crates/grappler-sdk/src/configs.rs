//! [`Configs`]: which of TensorFlow's built-in Grappler passes a plugin wants turned off.

/// A plugin's wish for one built-in pass (`TF_TriState`).
///
/// TensorFlow only honours `Off`: `Default` and `On` both leave the pass as the user configured
/// it (except `disable_model_pruning`, where `On` disables pruning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u32)]
pub enum TriState {
    /// `TF_TriState_Default`.
    #[default]
    Default = 0,
    /// `TF_TriState_Off`.
    Off = 1,
    /// `TF_TriState_On`.
    On = 2,
}

/// The tri-states of `TP_OptimizerConfigs`, in the struct's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)] // named exactly as the C fields, one per built-in pass
pub struct Configs {
    pub disable_model_pruning: TriState,
    pub implementation_selector: TriState,
    pub function_optimization: TriState,
    pub common_subgraph_elimination: TriState,
    pub arithmetic_optimization: TriState,
    pub debug_stripper: TriState,
    pub constant_folding: TriState,
    pub shape_optimization: TriState,
    pub auto_mixed_precision: TriState,
    pub auto_mixed_precision_onednn_bfloat16: TriState,
    pub auto_mixed_precision_mkl: TriState,
    pub pin_to_host_optimization: TriState,
    pub layout_optimizer: TriState,
    pub remapping: TriState,
    pub loop_optimization: TriState,
    pub dependency_optimization: TriState,
    pub auto_parallel: TriState,
    pub memory_optimization: TriState,
    pub scoped_allocator_optimization: TriState,
}

impl Configs {
    /// Everything `Default` (usable in constants, unlike `Default::default`).
    pub const DEFAULT: Configs = Configs {
        disable_model_pruning: TriState::Default,
        implementation_selector: TriState::Default,
        function_optimization: TriState::Default,
        common_subgraph_elimination: TriState::Default,
        arithmetic_optimization: TriState::Default,
        debug_stripper: TriState::Default,
        constant_folding: TriState::Default,
        shape_optimization: TriState::Default,
        auto_mixed_precision: TriState::Default,
        auto_mixed_precision_onednn_bfloat16: TriState::Default,
        auto_mixed_precision_mkl: TriState::Default,
        pin_to_host_optimization: TriState::Default,
        layout_optimizer: TriState::Default,
        remapping: TriState::Default,
        loop_optimization: TriState::Default,
        dependency_optimization: TriState::Default,
        auto_parallel: TriState::Default,
        memory_optimization: TriState::Default,
        scoped_allocator_optimization: TriState::Default,
    };

    /// The raw words of the TensorFlow 2.10+ layout, in field order.
    pub fn to_raw(&self) -> [u32; 19] {
        [
            self.disable_model_pruning,
            self.implementation_selector,
            self.function_optimization,
            self.common_subgraph_elimination,
            self.arithmetic_optimization,
            self.debug_stripper,
            self.constant_folding,
            self.shape_optimization,
            self.auto_mixed_precision,
            self.auto_mixed_precision_onednn_bfloat16,
            self.auto_mixed_precision_mkl,
            self.pin_to_host_optimization,
            self.layout_optimizer,
            self.remapping,
            self.loop_optimization,
            self.dependency_optimization,
            self.auto_parallel,
            self.memory_optimization,
            self.scoped_allocator_optimization,
        ]
        .map(|t| t as u32)
    }
}

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
    }
}
