//! The root-object macro shared by every kind in this crate.
//!
//! `#[derive(kube::CustomResource)]` makes `spec` mandatory, both when decoding and in the
//! generated schema. The reference objects do not always carry one (the seeds create
//! `SyncTarget`s with metadata only, and `syncer-gen` creates configs "with empty contents"),
//! so each root type here decodes a missing `spec` as its default and the generated CRD
//! never requires it.

/// Defines a cluster-scoped root object `$root { metadata, spec, status }` and implements
/// serde, [`kube::Resource`], [`kube::core::object::HasSpec`], [`kube::core::object::HasStatus`]
/// and [`kube::CustomResourceExt`] for it.
macro_rules! cluster_resource {
    (
        $(#[$doc:meta])*
        pub struct $root:ident {
            group: $group:literal,
            version: $version:literal,
            kind: $kind:literal,
            plural: $plural:literal,
            short_names: [$($short:literal),* $(,)?],
            categories: [$($category:literal),* $(,)?],
            status_subresource: $status_sub:literal,
            printer_columns: [$(($pc_name:literal, $pc_type:literal, $pc_path:literal)),* $(,)?],
            spec: $spec:ty,
            status: $status:ty $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $root {
            /// Standard object metadata.
            pub metadata: ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            /// Desired state. Decoded as the default when the object has no `spec`.
            pub spec: $spec,
            /// Observed state.
            pub status: Option<$status>,
        }

        impl $root {
            /// The kind, as written in `kind:`.
            pub const KIND: &'static str = $kind;
            /// The API group.
            pub const GROUP: &'static str = $group;
            /// The API version (without group).
            pub const VERSION: &'static str = $version;
            /// The resource name (lowercase plural) used in URLs.
            pub const PLURAL: &'static str = $plural;

            /// A new object with the given name and spec and no status.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    metadata: ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(name.to_string()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }

            /// `group/version`, as written in `apiVersion:`.
            pub fn api_version() -> String {
                format!("{}/{}", $group, $version)
            }
        }

        impl ::serde::Serialize for $root {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeStruct;
                let fields = if self.status.is_some() { 5 } else { 4 };
                let mut obj = serializer.serialize_struct($kind, fields)?;
                obj.serialize_field("apiVersion", &Self::api_version())?;
                obj.serialize_field("kind", $kind)?;
                obj.serialize_field("metadata", &self.metadata)?;
                obj.serialize_field("spec", &self.spec)?;
                if let Some(status) = &self.status {
                    obj.serialize_field("status", status)?;
                }
                obj.end()
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $root {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // `apiVersion` and `kind` are accepted and ignored: the API server (or
                // the caller) has already routed the object to this type.
                #[derive(::serde::Deserialize, Default)]
                #[serde(default)]
                struct Wire {
                    metadata: ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                    spec: Option<$spec>,
                    status: Option<$status>,
                }
                let wire = Wire::deserialize(deserializer)?;
                Ok(Self {
                    metadata: wire.metadata,
                    spec: wire.spec.unwrap_or_default(),
                    status: wire.status,
                })
            }
        }

        impl ::kube::Resource for $root {
            type DynamicType = ();
            type Scope = ::k8s_openapi::ClusterResourceScope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }

        impl ::kube::core::object::HasSpec for $root {
            type Spec = $spec;
            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn spec_mut(&mut self) -> &mut $spec {
                &mut self.spec
            }
        }

        impl ::kube::core::object::HasStatus for $root {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
            fn status_mut(&mut self) -> &mut Option<$status> {
                &mut self.status
            }
        }

        impl ::kube::CustomResourceExt for $root {
            fn crd() -> ::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
                $crate::crd_builder::build_crd::<$spec, $status>(&$crate::crd_builder::CrdInfo {
                    group: $group,
                    version: $version,
                    kind: $kind,
                    plural: $plural,
                    short_names: &[$($short),*],
                    categories: &[$($category),*],
                    status_subresource: $status_sub,
                    printer_columns: &[$(($pc_name, $pc_type, $pc_path)),*],
                })
            }
            fn crd_name() -> &'static str {
                concat!($plural, ".", $group)
            }
            fn api_resource() -> ::kube::core::ApiResource {
                ::kube::core::ApiResource::erase::<Self>(&())
            }
            fn shortnames() -> &'static [&'static str] {
                &[$($short),*]
            }
        }
    };
}
