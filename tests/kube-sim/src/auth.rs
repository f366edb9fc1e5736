//! Authentication (bearer tokens) and the identity/permission table that answers
//! TokenReview and SubjectAccessReview (authentication.k8s.io/v1, authorization.k8s.io/v1).
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::RwLock;

/// `authentication.k8s.io/v1` UserInfo.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn new(username: &str, groups: &[&str]) -> Self {
        UserInfo {
            username: username.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.username, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        v
    }
}

/// One allow rule.
///
/// `subject` is a user name or `group:<name>`. `resources` entries are
/// `<resource>[.<group>][/<subresource>]` (`pods`, `pods/eviction`, `deployments.apps`,
/// `*`), or non-resource URLs starting with `/` (a trailing `*` is a prefix match).
/// `verbs` may contain `*`. `namespace: None` means every namespace.
#[derive(Clone, Debug, Default)]
pub struct Permission {
    pub subject: String,
    pub verbs: Vec<String>,
    pub resources: Vec<String>,
    pub namespace: Option<String>,
}

impl Permission {
    pub fn new(subject: &str, verbs: &[&str], resources: &[&str]) -> Self {
        Permission {
            subject: subject.into(),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            resources: resources.iter().map(|s| s.to_string()).collect(),
            namespace: None,
        }
    }
}

/// What a SubjectAccessReview asks about.
#[derive(Clone, Debug, Default)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    /// Non-resource request path (when `resource` is empty).
    pub path: String,
}

/// Tokens and permissions. Members of `system:masters` are allowed everything.
#[derive(Default)]
pub struct Auth {
    tokens: RwLock<HashMap<String, UserInfo>>,
    perms: RwLock<Vec<Permission>>,
}

fn resource_matches(pattern: &str, a: &Access) -> bool {
    if pattern == "*" {
        return !a.resource.is_empty();
    }
    if pattern.starts_with('/') {
        if a.resource.is_empty() {
            return match pattern.strip_suffix('*') {
                Some(prefix) => a.path.starts_with(prefix),
                None => a.path == pattern,
            };
        }
        return false;
    }
    let (rg, sub) = match pattern.split_once('/') {
        Some((rg, s)) => (rg, s),
        None => (pattern, ""),
    };
    let (res, group) = match rg.split_once('.') {
        Some((r, g)) => (r, g),
        None => (rg, ""),
    };
    (res == "*" || res == a.resource)
        && (group == "*" || group == a.group)
        && (sub == "*" || sub == a.subresource)
}

impl Auth {
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.to_string(), user);
    }

    pub fn allow(&self, p: Permission) {
        self.perms
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(p);
    }

    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        self.tokens
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    /// The authorization decision for a user with groups.
    pub fn authorize(&self, user: &str, groups: &[String], a: &Access) -> bool {
        if groups.iter().any(|g| g == "system:masters") {
            return true;
        }
        let perms = self.perms.read().unwrap_or_else(|e| e.into_inner());
        perms.iter().any(|p| {
            let subject_ok = match p.subject.strip_prefix("group:") {
                Some(g) => groups.iter().any(|x| x == g),
                None => p.subject == user,
            };
            subject_ok
                && p.verbs.iter().any(|v| v == "*" || *v == a.verb)
                && p.namespace.as_deref().is_none_or(|n| n == a.namespace)
                && p.resources.iter().any(|r| resource_matches(r, a))
        })
    }

    /// Answers a TokenReview body (status filled as kube-apiserver's token authenticator does).
    pub fn token_review(&self, mut review: Value) -> Value {
        let token = review
            .pointer("/spec/token")
            .and_then(Value::as_str)
            .unwrap_or("");
        let audiences = review.pointer("/spec/audiences").cloned();
        let status = match self.authenticate(token) {
            Some(u) => {
                let mut s = json!({"authenticated": true, "user": u.to_json()});
                if let Some(a) = audiences {
                    s["audiences"] = a;
                }
                s
            }
            None => json!({"user": {}, "error": "invalid bearer token"}),
        };
        review["status"] = status;
        review
    }

    /// Answers a SubjectAccessReview body; `requester` fills in SelfSubjectAccessReviews.
    pub fn subject_access_review(&self, mut review: Value, requester: Option<&UserInfo>) -> Value {
        let spec = review.get("spec").cloned().unwrap_or_else(|| json!({}));
        let (user, groups) = match requester {
            Some(u) => (u.username.clone(), u.groups.clone()),
            None => (
                spec.get("user")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                spec.get("groups")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|g| g.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
        };
        let s = |p: &str| {
            spec.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let access = if spec.get("resourceAttributes").is_some() {
            Access {
                verb: s("/resourceAttributes/verb"),
                group: s("/resourceAttributes/group"),
                resource: s("/resourceAttributes/resource"),
                subresource: s("/resourceAttributes/subresource"),
                namespace: s("/resourceAttributes/namespace"),
                path: String::new(),
            }
        } else {
            Access {
                verb: s("/nonResourceAttributes/verb"),
                path: s("/nonResourceAttributes/path"),
                ..Default::default()
            }
        };
        let allowed = self.authorize(&user, &groups, &access);
        review["status"] = if allowed {
            json!({"allowed": true, "reason": "allowed by kube-sim permission table"})
        } else {
            json!({"allowed": false})
        };
        review
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_table() {
        let a = Auth::default();
        a.add_token("t1", UserInfo::new("alice", &["devs"]));
        a.allow(Permission::new(
            "group:devs",
            &["create"],
            &["pods/eviction"],
        ));
        a.allow(Permission::new("bob", &["get"], &["/metrics", "/debug/*"]));
        a.allow(Permission::new("carol", &["*"], &["deployments.apps"]));
        let evict = Access {
            verb: "create".into(),
            resource: "pods".into(),
            subresource: "eviction".into(),
            ..Default::default()
        };
        assert!(a.authorize("alice", &["devs".into()], &evict));
        assert!(!a.authorize("alice", &[], &evict));
        let pods = Access {
            verb: "create".into(),
            resource: "pods".into(),
            ..Default::default()
        };
        assert!(!a.authorize("alice", &["devs".into()], &pods));
        let metrics = Access {
            verb: "get".into(),
            path: "/metrics".into(),
            ..Default::default()
        };
        assert!(a.authorize("bob", &[], &metrics));
        let dbg = Access {
            verb: "get".into(),
            path: "/debug/pprof".into(),
            ..Default::default()
        };
        assert!(a.authorize("bob", &[], &dbg));
        let dep = Access {
            verb: "patch".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            ..Default::default()
        };
        assert!(a.authorize("carol", &[], &dep));
        assert!(a.authorize("x", &["system:masters".into()], &dep));
        let tr = a.token_review(json!({"spec": {"token": "t1"}}));
        assert_eq!(tr["status"]["authenticated"], true);
        assert_eq!(tr["status"]["user"]["username"], "alice");
        // An unauthenticated review leaves `authenticated` out (false is omitted).
        let no = a.token_review(json!({"spec": {"token": "no"}}));
        assert!(no["status"].get("authenticated").is_none());
        assert_eq!(no["status"]["error"], "invalid bearer token");
    }
}
