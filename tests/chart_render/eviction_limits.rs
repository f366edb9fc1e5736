//! The percentage and per-workload eviction limits' policy fields through the chart: the values schema checks them, and the rendered
//! policy loads with them.

use super::*;

#[test]
fn the_new_limits_pass_through_and_bad_values_are_refused_by_the_schema() {
    let limits = json!({
        "maxNoOfPodsToEvictPerNode": "10%",
        "maxNoOfPodsToEvictPerNamespace": 20,
        "maxNoOfPodsToEvictPerWorkload": "34%",
        "maxUnavailablePerWorkload": 1,
        "workloadEvictionWindow": {"duration": "1h", "maxEvictions": "50%"},
    });
    let mut values = serde_json::Map::new();
    for (k, v) in limits.as_object().expect("object") {
        values.insert(k.clone(), v.clone());
    }
    values.insert("profiles".into(), json!([]));
    let r = render_ok(json!({"deschedulerPolicy": Value::Object(values)}));
    let policy = check_policy(&r);
    for (k, v) in limits.as_object().expect("object") {
        assert_eq!(&policy[k], v, "{k}");
    }
    for bad in [
        json!({"maxNoOfPodsToEvictPerNamespace": "150%"}),
        json!({"maxNoOfPodsToEvictPerNode": -1}),
        json!({"maxUnavailablePerWorkload": "10.5%"}),
        json!({"workloadEvictionWindow": {"duration": "1h"}}),
    ] {
        let (ty, msg) = render_err(json!({"deschedulerPolicy": bad}));
        assert_eq!(ty, "HelmValuesError", "{bad}: {msg}");
    }
}
