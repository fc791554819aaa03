//! Tidying of the descriptions that doc comments put into the CRD schemas.
//
// Doc comments keep the line breaks of the source, and `kubectl explain` prints a description's
// line breaks as hard breaks, which renders our wrapped-at-100-columns comments raggedly. The
// descriptions eto writes are therefore reflowed: lines of one paragraph are joined with a
// space, paragraphs stay separated by a blank line.
//
// Embedded pod templates keep their full structural schema (so the API server still rejects
// misspelt or mistyped template fields and prunes unknown ones), but not the Kubernetes API's
// own prose: those descriptions are four fifths of the TrainingJob CRD, and without them the
// CRD fits in the 262,144 bytes of the `kubectl.kubernetes.io/last-applied-configuration`
// annotation, so plain `kubectl apply`, Argo CD's default sync and Helm all install it. The
// prose stays one command away: `kubectl explain pod.spec`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// Property names whose subtree is an upstream Kubernetes type, not eto's own prose.
const UPSTREAM_SUBTREES: &[&str] = &["template"];

/// Reflows every description eto wrote in the schemas of `crd` and removes those of upstream
/// Kubernetes types embedded in it.
pub(crate) fn reflow(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            reflow_schema(schema);
        }
    }
    crd
}

fn reflow_schema(schema: &mut JSONSchemaProps) {
    if let Some(description) = schema.description.as_mut() {
        *description = reflow_text(description);
    }
    for (name, property) in schema.properties.iter_mut().flatten() {
        if UPSTREAM_SUBTREES.contains(&name.as_str()) {
            let own_description = property.description.take().map(|text| reflow_text(&text));
            remove_descriptions(property);
            property.description = own_description;
        } else {
            reflow_schema(property);
        }
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(items)) => reflow_schema(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(reflow_schema),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = schema.additional_properties.as_mut() {
        reflow_schema(values);
    }
}

fn remove_descriptions(schema: &mut JSONSchemaProps) {
    schema.description = None;
    schema
        .properties
        .iter_mut()
        .flatten()
        .for_each(|(_, property)| remove_descriptions(property));
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(items)) => remove_descriptions(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => {
            items.iter_mut().for_each(remove_descriptions);
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = schema.additional_properties.as_mut() {
        remove_descriptions(values);
    }
}

fn reflow_text(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Appends `more` to the description of the property `property` of `schema` (an object's
/// schema as schemars builds it): what a shared field means beyond its own text for the kind
/// whose schema this is.
pub(crate) fn extend(schema: &mut schemars::Schema, property: &str, more: &str) {
    let described = schema
        .get_mut("properties")
        .and_then(|properties| properties.get_mut(property))
        .and_then(serde_json::Value::as_object_mut);
    if let Some(described) = described {
        let text = described
            .get("description")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let joined = if text.is_empty() {
            more.to_string()
        } else {
            format!("{text} {more}")
        };
        described.insert("description".into(), joined.into());
    }
}

#[cfg(test)]
mod tests {
    use super::reflow_text;

    #[test]
    fn reflow_joins_lines_of_a_paragraph_and_keeps_paragraph_breaks() {
        let text =
            "Seconds the job may run, counted from\n`status.startTime`.\n\nSecond\nparagraph.";
        assert_eq!(
            reflow_text(text),
            "Seconds the job may run, counted from `status.startTime`.\n\nSecond paragraph."
        );
    }
}
