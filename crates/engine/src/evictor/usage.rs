//! How a node-usage plugin (LowNodeUtilization, HighNodeUtilization) saw the nodes when it decided:
//! the resources it tracks and the levels it classified them by. `plan` turns this into its table
//! of node usage before and after the planned evictions.

use crate::snapshot::NodeId;

/// The class of a node against a plugin's levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NodeClass {
    /// Every thresholded resource at or below its low level.
    Under,
    /// Neither under nor over.
    Appropriate,
    /// Some thresholded resource above its high level.
    Over,
}

impl NodeClass {
    /// The class's name as `plan` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeClass::Under => "under",
            NodeClass::Appropriate => "appropriate",
            NodeClass::Over => "over",
        }
    }

    /// Classifies a node from its usage percentages (`None`: the node lacks the resource, which
    /// counts as 0 %, as upstream) against `low` and `high` levels per resource (`None`: no level).
    pub fn of(percents: &[Option<f64>], low: &[Option<f64>], high: &[Option<f64>]) -> NodeClass {
        let at = |r: usize| percents.get(r).copied().flatten().unwrap_or(0.0);
        let has_low = low.iter().any(Option::is_some);
        let under = has_low
            && low
                .iter()
                .enumerate()
                .all(|(r, l)| l.is_none_or(|l| l >= at(r)));
        let over = high
            .iter()
            .enumerate()
            .any(|(r, h)| h.is_some_and(|h| at(r) > h));
        if under {
            NodeClass::Under
        } else if over {
            NodeClass::Over
        } else {
            NodeClass::Appropriate
        }
    }
}

/// A node-usage plugin's view of the cycle's nodes, recorded once per run.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsageReport {
    /// Profile.
    pub profile: String,
    /// Plugin.
    pub plugin: String,
    /// Resource names (`cpu`, `memory`, `pods`, extended resources), the table's columns.
    pub resources: Vec<String>,
    /// The level under which a node is underutilized, per resource (percent; deviation mode:
    /// already resolved against the mean).
    pub low: Vec<Option<f64>>,
    /// The level over which a node is overutilized, per resource (HighNodeUtilization: none).
    pub high: Vec<Option<f64>>,
    /// The nodes the plugin classified.
    pub nodes: Vec<NodeId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_upstream_rules() {
        let low = [Some(20.0), Some(20.0), None];
        let high = [Some(50.0), Some(50.0), None];
        // Every thresholded resource at or below its low level.
        assert_eq!(
            NodeClass::of(&[Some(20.0), Some(5.0), Some(90.0)], &low, &high),
            NodeClass::Under
        );
        // One resource above its high level.
        assert_eq!(
            NodeClass::of(&[Some(10.0), Some(50.1), None], &low, &high),
            NodeClass::Over
        );
        assert_eq!(
            NodeClass::of(&[Some(30.0), Some(50.0), None], &low, &high),
            NodeClass::Appropriate
        );
        // A resource the node lacks counts as 0 %.
        assert_eq!(
            NodeClass::of(&[None, None, None], &low, &high),
            NodeClass::Under
        );
        // HighNodeUtilization: no high levels, never over.
        assert_eq!(
            NodeClass::of(&[Some(99.0), Some(99.0), None], &low, &[None, None, None]),
            NodeClass::Appropriate
        );
    }
}
