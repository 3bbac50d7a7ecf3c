//! The key this controller seals its marks on ManifestWorks with ([`mwrs_engine::marks`]):
//! kept in a Secret of its own namespace, so that every replica and every restart seals
//! and checks with the same key. The first replica to start makes it.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use mwrs_engine::marks::{MIN_KEY_LEN, MarkKey};

/// The Secret's data key holding the key's bytes.
pub const DATA_KEY: &str = "key";

/// Why the key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("Secret {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Secret {namespace}/{name} holds no usable key in data.{DATA_KEY} (at least {MIN_KEY_LEN} bytes): delete it and a new one is made"
    )]
    Unusable { namespace: String, name: String },
}

/// The key in Secret `namespace/name`, made (32 random bytes) when there is none.
pub async fn load_or_create(
    client: Client,
    namespace: &str,
    name: &str,
) -> Result<MarkKey, KeyError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let api_error = |source| KeyError::Api {
        namespace: namespace.to_string(),
        name: name.to_string(),
        source,
    };
    let secret = match api.get_opt(name).await.map_err(api_error)? {
        Some(s) => s,
        None => match api.create(&PostParams::default(), &new_secret(name)).await {
            Ok(s) => s,
            // Another replica made it first: use that one.
            Err(kube::Error::Api(e)) if e.code == 409 => api.get(name).await.map_err(api_error)?,
            Err(e) => return Err(api_error(e)),
        },
    };
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .and_then(|b| MarkKey::new(&b.0).ok())
        .ok_or_else(|| KeyError::Unusable {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
}

fn new_secret(name: &str) -> Secret {
    let bytes: [u8; 32] = rand::random();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "mwrs-controller".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some([(DATA_KEY.to_string(), ByteString(bytes.to_vec()))].into()),
        ..Default::default()
    }
}
