//! The table of every C function the host exports to plugins.
//!
//! The linker drops functions nothing references, even `#[no_mangle]` ones in a library crate;
//! [`crate::plugin::load_plugin`] references this table, which keeps them all in any
//! executable that can load plugins. The executable must also put them in its dynamic symbol
//! table (`-Wl,--export-dynamic-symbol=TF_*`; see the `unbound` CLI's build script).

use crate::{buffer, status, util_api, util_properties};

/// (name, address) of each exported function.
pub fn exported_symbols() -> Vec<(&'static str, usize)> {
    vec![
        ("TF_NewStatus", status::TF_NewStatus as *const () as usize),
        (
            "TF_DeleteStatus",
            status::TF_DeleteStatus as *const () as usize,
        ),
        ("TF_SetStatus", status::TF_SetStatus as *const () as usize),
        ("TF_SetPayload", status::TF_SetPayload as *const () as usize),
        (
            "TF_SetStatusFromIOError",
            status::TF_SetStatusFromIOError as *const () as usize,
        ),
        ("TF_GetCode", status::TF_GetCode as *const () as usize),
        ("TF_Message", status::TF_Message as *const () as usize),
        ("TF_NewBuffer", buffer::TF_NewBuffer as *const () as usize),
        (
            "TF_NewBufferFromString",
            buffer::TF_NewBufferFromString as *const () as usize,
        ),
        (
            "TF_DeleteBuffer",
            buffer::TF_DeleteBuffer as *const () as usize,
        ),
        ("TF_GetBuffer", buffer::TF_GetBuffer as *const () as usize),
        (
            "TF_GetNodesToPreserveListSize",
            util_api::TF_GetNodesToPreserveListSize as *const () as usize,
        ),
        (
            "TF_GetNodesToPreserveList",
            util_api::TF_GetNodesToPreserveList as *const () as usize,
        ),
        (
            "TF_GetFetchNodesListSize",
            util_api::TF_GetFetchNodesListSize as *const () as usize,
        ),
        (
            "TF_GetFetchNodesList",
            util_api::TF_GetFetchNodesList as *const () as usize,
        ),
        (
            "TF_NewFunctionLibraryDefinition",
            util_api::TF_NewFunctionLibraryDefinition as *const () as usize,
        ),
        (
            "TF_DeleteFunctionLibraryDefinition",
            util_api::TF_DeleteFunctionLibraryDefinition as *const () as usize,
        ),
        (
            "TF_LookUpOpDef",
            util_api::TF_LookUpOpDef as *const () as usize,
        ),
        (
            "TF_NewGraphProperties",
            util_properties::TF_NewGraphProperties as *const () as usize,
        ),
        (
            "TF_DeleteGraphProperties",
            util_properties::TF_DeleteGraphProperties as *const () as usize,
        ),
        (
            "TF_InferStatically",
            util_properties::TF_InferStatically as *const () as usize,
        ),
        (
            "TF_GetInputPropertiesListSize",
            util_properties::TF_GetInputPropertiesListSize as *const () as usize,
        ),
        (
            "TF_GetOutputPropertiesListSize",
            util_properties::TF_GetOutputPropertiesListSize as *const () as usize,
        ),
        (
            "TF_GetInputPropertiesList",
            util_properties::TF_GetInputPropertiesList as *const () as usize,
        ),
        (
            "TF_GetOutputPropertiesList",
            util_properties::TF_GetOutputPropertiesList as *const () as usize,
        ),
    ]
}
