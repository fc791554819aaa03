//! The SSH key pair eto generates for a job.
//!
//! The key is Ed25519. A TrainingJob's is stored under the key names et-operator and Arena use
//! (`id_rsa`, `id_rsa.pub`, `config`), so that a generated Secret and one provided through the
//! `arena.kubeflow.org/ssh-secret` annotation mount the same way. An MPIJob's Secret is of type
//! `kubernetes.io/ssh-auth` with mpi-operator's names (`ssh-privatekey`, `ssh-publickey`) and
//! no client configuration (mpi-operator's images bring their own). OpenSSH reads the key type
//! from the key itself. The private key is never logged, nor put in status or events.

use std::collections::BTreeMap;

use eto_engine::builders::SSH_AUTH_SECRET_TYPE;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use ssh_key::{Algorithm, LineEnding, PrivateKey};

/// The client configuration every pod gets: workers are reached by name, their host keys
/// are not known in advance.
pub const SSH_CONFIG: &str =
    "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\nLogLevel ERROR\n";

/// `secret` with a freshly generated key pair in its data, under the names its type calls for.
///
/// # Errors
/// The key could not be generated or encoded.
pub fn with_new_key_pair(mut secret: Secret, comment: &str) -> Result<Secret, ssh_key::Error> {
    let mut key = PrivateKey::random(&mut ssh_key::rand_core::OsRng, Algorithm::Ed25519)?;
    key.set_comment(comment);
    let private = key.to_openssh(LineEnding::LF)?;
    let public = key.public_key().to_openssh()?;
    let private = ByteString(private.as_bytes().to_vec());
    let public = ByteString(format!("{public}\n").into_bytes());
    secret.data = Some(if secret.type_.as_deref() == Some(SSH_AUTH_SECRET_TYPE) {
        BTreeMap::from([
            ("ssh-privatekey".to_string(), private),
            ("ssh-publickey".to_string(), public),
        ])
    } else {
        BTreeMap::from([
            ("id_rsa".to_string(), private),
            ("id_rsa.pub".to_string(), public),
            (
                "config".to_string(),
                ByteString(SSH_CONFIG.as_bytes().to_vec()),
            ),
        ])
    });
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_key_pairs_are_distinct_openssh_ed25519_keys() {
        let first = with_new_key_pair(Secret::default(), "eto:default/mnist").unwrap();
        let second = with_new_key_pair(Secret::default(), "eto:default/mnist").unwrap();
        let data = first.data.unwrap();
        let private = String::from_utf8(data["id_rsa"].0.clone()).unwrap();
        let public = String::from_utf8(data["id_rsa.pub"].0.clone()).unwrap();
        assert!(private.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
        assert!(
            public.starts_with("ssh-ed25519 ") && public.trim_end().ends_with("eto:default/mnist")
        );
        let parsed = PrivateKey::from_openssh(&private).unwrap();
        assert_eq!(parsed.public_key().to_openssh().unwrap(), public.trim_end());
        assert_ne!(second.data.unwrap()["id_rsa"], data["id_rsa"]);
        assert_eq!(data["config"].0, SSH_CONFIG.as_bytes());
    }

    #[test]
    fn an_ssh_auth_secret_gets_mpi_operators_key_names() {
        let secret = Secret {
            type_: Some(SSH_AUTH_SECRET_TYPE.into()),
            ..Secret::default()
        };
        let data = with_new_key_pair(secret, "eto:default/pi")
            .unwrap()
            .data
            .unwrap();
        let keys: Vec<&String> = data.keys().collect();
        assert_eq!(keys, ["ssh-privatekey", "ssh-publickey"]);
        let private = String::from_utf8(data["ssh-privatekey"].0.clone()).unwrap();
        assert!(PrivateKey::from_openssh(&private).is_ok());
    }
}
