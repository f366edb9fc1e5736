//! The new ReplicaSet: finding or creating it and keeping the revision annotations in step
//! (upstream `getNewReplicaSet`).

use super::*;

impl Sync<'_> {
    /// Finds or (when `create`) creates the new ReplicaSet and syncs revisions (upstream
    /// `getNewReplicaSet`).
    pub(super) fn sync_revision(&mut self, create: bool) {
        let max_old = self
            .old_indices()
            .iter()
            .map(|i| revision(&self.rss[*i]))
            .max()
            .unwrap_or(0);
        let new_revision = max_old + 1;
        if let Some(i) = self.new_idx {
            self.sync_found_new_rs(i, new_revision);
        } else if create {
            self.create_new_rs(new_revision);
        }
    }

    /// An existing new ReplicaSet: raises its revision to `new_revision`, copies
    /// `minReadySeconds`, and reports it found on the Deployment.
    fn sync_found_new_rs(&mut self, i: usize, new_revision: i64) {
        let deadline = self.progress_deadline();
        let now = self.now();
        let min_ready = self.spec().min_ready_seconds;
        let rs = &mut self.rss[i];
        let before = rs.clone();
        if revision(rs) < new_revision {
            rs.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(REVISION_ANNOTATION.into(), new_revision.to_string());
        }
        let rs_spec = &mut rs.spec;
        if rs_spec.min_ready_seconds.unwrap_or(0) != min_ready.unwrap_or(0) {
            rs_spec.min_ready_seconds = min_ready;
        }
        if !same_json(&before, rs) {
            self.dirty[i] = true;
        }
        let rev = revision(&self.rss[i]).to_string();
        let rs_name = name(&self.rss[i].metadata).to_string();
        self.set_deployment_revision(rev);
        let has_cond = self
            .out_d
            .status
            .as_ref()
            .and_then(|s| get_condition(s, "Progressing"))
            .is_some();
        if deadline.is_some() && !has_cond {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "True",
                "FoundNewReplicaSet",
                format!("Found new replica set \"{rs_name}\""),
            );
        }
    }

    /// Creates the new ReplicaSet at revision `new_revision`, unless its name is taken by one
    /// the Deployment does not own (then `collisionCount` goes up and creation waits a tick).
    fn create_new_rs(&mut self, new_revision: i64) {
        let deadline = self.progress_deadline();
        let now = self.now();
        let collision = self.out_d.status.as_ref().and_then(|s| s.collision_count);
        let hash = pod_template_hash(&self.spec().template, collision);
        let rs_name = format!("{}-{hash}", name(&self.d.metadata));
        if self
            .state
            .replica_sets
            .iter()
            .any(|rs| ns(&rs.metadata) == ns(&self.d.metadata) && name(&rs.metadata) == rs_name)
        {
            let st = self.status_mut();
            st.collision_count = Some(collision.unwrap_or(0).saturating_add(1));
            return;
        }
        let size = self.new_rs_size();
        let rs = self.new_rs_object(&rs_name, &hash, new_revision);
        self.rss.push(rs);
        self.dirty.push(false);
        let i = self.rss.len() - 1;
        self.new_idx = Some(i);
        self.created = true;
        self.scale_rs(i, size);
        self.set_deployment_revision(new_revision.to_string());
        if deadline.is_some() {
            set_condition(
                self.status_mut(),
                now,
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                format!("Created new replica set \"{rs_name}\""),
            );
        }
    }

    /// The size a new ReplicaSet starts at: the full count for Recreate; for RollingUpdate what
    /// the surge leaves beside the old ReplicaSets, at most the full count.
    fn new_rs_size(&self) -> i32 {
        if !self.rolling {
            return self.replicas;
        }
        let old_total: i32 = self
            .old_indices()
            .iter()
            .map(|i| rs_replicas(&self.rss[*i]))
            .sum();
        let max_total = self.replicas + self.surge;
        if old_total >= max_total {
            0
        } else {
            (max_total - old_total).min(self.replicas)
        }
    }

    /// The new ReplicaSet object (size 0): the template and selector with the hash label, the
    /// Deployment's copied annotations and the revision.
    fn new_rs_object(&self, rs_name: &str, hash: &str, new_revision: i64) -> ReplicaSet {
        let spec = self.spec();
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH_LABEL.into(), hash.to_string());
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH_LABEL.into(), hash.to_string());
        let mut annotations: BTreeMap<String, String> = self
            .d
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| !ANNOTATIONS_NOT_COPIED.contains(&k.as_str()))
            .collect();
        annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(rs_name.to_string()),
                namespace: Some(ns(&self.d.metadata).to_string()),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![owner_ref("apps/v1", "Deployment", &self.d.metadata)]),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            },
            status: None,
        }
    }

    fn set_deployment_revision(&mut self, rev: String) {
        self.out_d
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(REVISION_ANNOTATION.into(), rev);
    }
}
