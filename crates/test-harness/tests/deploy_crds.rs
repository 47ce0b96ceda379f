//! prometheus-operator's CRDs the chart's monitoring objects need (`monitoring.coreos.com/v1`
//! PodMonitor, ServiceMonitor, PrometheusRule), cut down to structural schemas with every field
//! of their specs by its real name, so the dry-run test's API server prunes a misspelt field
//! and notices. Not a test file: `deploy.rs` installs them.
#![allow(missing_docs)]

use anyhow::{Context, Result, ensure};
use kube::api::GroupVersionKind;
use kube::discovery;
use test_harness::ControlPlane;

/// prometheus-operator's PodMonitor CRD (`monitoring.coreos.com/v1`), cut down to a structural
/// schema: every field of `spec` and of a `podMetricsEndpoints` entry by its real name (so the
/// API server prunes a misspelt one and the dry-run notices), the deeper objects kept whole.
const PODMONITOR_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: podmonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PodMonitor, listKind: PodMonitorList, plural: podmonitors, singular: podmonitor, categories: [prometheus-operator], shortNames: [pmon]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [selector]
            properties:
              attachMetadata: {type: object, x-kubernetes-preserve-unknown-fields: true}
              bodySizeLimit: {type: string}
              fallbackScrapeProtocol: {type: string}
              jobLabel: {type: string}
              keepDroppedTargets: {type: integer, format: int64}
              labelLimit: {type: integer, format: int64}
              labelNameLengthLimit: {type: integer, format: int64}
              labelValueLengthLimit: {type: integer, format: int64}
              namespaceSelector:
                type: object
                properties:
                  any: {type: boolean}
                  matchNames: {type: array, items: {type: string}}
              podMetricsEndpoints:
                type: array
                items:
                  type: object
                  properties:
                    authorization: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    basicAuth: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    bearerTokenSecret: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    enableHttp2: {type: boolean}
                    filterRunning: {type: boolean}
                    followRedirects: {type: boolean}
                    honorLabels: {type: boolean}
                    honorTimestamps: {type: boolean}
                    interval: {type: string}
                    metricRelabelings: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}
                    noProxy: {type: string}
                    oauth2: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    params: {type: object, additionalProperties: {type: array, items: {type: string}}}
                    path: {type: string}
                    port: {type: string}
                    portNumber: {type: integer, format: int32}
                    proxyUrl: {type: string}
                    relabelings: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}
                    scheme: {type: string, enum: [http, https]}
                    scrapeTimeout: {type: string}
                    targetPort: {x-kubernetes-int-or-string: true}
                    tlsConfig: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    trackTimestampsStaleness: {type: boolean}
              podTargetLabels: {type: array, items: {type: string}}
              sampleLimit: {type: integer, format: int64}
              scrapeClass: {type: string}
              scrapeProtocols: {type: array, items: {type: string}}
              selector:
                type: object
                x-kubernetes-map-type: atomic
                properties:
                  matchExpressions: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}
                  matchLabels: {type: object, additionalProperties: {type: string}}
              targetLimit: {type: integer, format: int64}
"#;

/// prometheus-operator's ServiceMonitor CRD, cut down like [`PODMONITOR_CRD`].
const SERVICEMONITOR_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor, categories: [prometheus-operator], shortNames: [smon]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [selector]
            properties:
              attachMetadata: {type: object, x-kubernetes-preserve-unknown-fields: true}
              bodySizeLimit: {type: string}
              endpoints:
                type: array
                items:
                  type: object
                  properties:
                    authorization: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    basicAuth: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    bearerTokenFile: {type: string}
                    bearerTokenSecret: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    enableHttp2: {type: boolean}
                    filterRunning: {type: boolean}
                    followRedirects: {type: boolean}
                    honorLabels: {type: boolean}
                    honorTimestamps: {type: boolean}
                    interval: {type: string}
                    metricRelabelings: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}
                    noProxy: {type: string}
                    oauth2: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    params: {type: object, additionalProperties: {type: array, items: {type: string}}}
                    path: {type: string}
                    port: {type: string}
                    proxyUrl: {type: string}
                    relabelings: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}
                    scheme: {type: string, enum: [http, https]}
                    scrapeTimeout: {type: string}
                    targetPort: {x-kubernetes-int-or-string: true}
                    tlsConfig: {type: object, x-kubernetes-preserve-unknown-fields: true}
                    trackTimestampsStaleness: {type: boolean}
              fallbackScrapeProtocol: {type: string}
              jobLabel: {type: string}
              keepDroppedTargets: {type: integer, format: int64}
              labelLimit: {type: integer, format: int64}
              labelNameLengthLimit: {type: integer, format: int64}
              labelValueLengthLimit: {type: integer, format: int64}
              namespaceSelector:
                type: object
                properties:
                  any: {type: boolean}
                  matchNames: {type: array, items: {type: string}}
              podTargetLabels: {type: array, items: {type: string}}
              sampleLimit: {type: integer, format: int64}
              scrapeClass: {type: string}
              scrapeProtocols: {type: array, items: {type: string}}
              selector:
                type: object
                x-kubernetes-map-type: atomic
                properties:
                  matchExpressions: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}
                  matchLabels: {type: object, additionalProperties: {type: string}}
              targetLabels: {type: array, items: {type: string}}
              targetLimit: {type: integer, format: int64}
"#;

/// prometheus-operator's PrometheusRule CRD, cut down like [`PODMONITOR_CRD`].
const PROMETHEUSRULE_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PrometheusRule, listKind: PrometheusRuleList, plural: prometheusrules, singular: prometheusrule, categories: [prometheus-operator], shortNames: [promrule]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              groups:
                type: array
                items:
                  type: object
                  required: [name]
                  properties:
                    interval: {type: string}
                    labels: {type: object, additionalProperties: {type: string}}
                    limit: {type: integer}
                    name: {type: string, minLength: 1}
                    partial_response_strategy: {type: string}
                    query_offset: {type: string}
                    rules:
                      type: array
                      items:
                        type: object
                        required: [expr]
                        properties:
                          alert: {type: string}
                          annotations: {type: object, additionalProperties: {type: string}}
                          expr: {x-kubernetes-int-or-string: true}
                          for: {type: string}
                          keep_firing_for: {type: string, minLength: 1}
                          labels: {type: object, additionalProperties: {type: string}}
                          record: {type: string}
"#;

/// Applies the three CRDs with the control plane's kubectl from a file written here, and waits
/// until the API server serves each kind.
pub(crate) async fn install_monitoring_crds(control_plane: &ControlPlane, client: &kube::Client) -> Result<()> {
    for (kind, crd) in
        [("PodMonitor", PODMONITOR_CRD), ("ServiceMonitor", SERVICEMONITOR_CRD), ("PrometheusRule", PROMETHEUSRULE_CRD)]
    {
        let file = control_plane.dir().join(format!("{}-crd.yaml", kind.to_lowercase()));
        std::fs::write(&file, crd).with_context(|| format!("writing the {kind} CRD"))?;
        let out = tokio::process::Command::new(control_plane.kubectl_path())
            .arg("--kubeconfig")
            .arg(control_plane.admin_kubeconfig())
            .args(["apply", "--server-side", "-f"])
            .arg(&file)
            .output()
            .await
            .context("running kubectl apply")?;
        ensure!(out.status.success(), "kubectl apply of the {kind} CRD: {}", String::from_utf8_lossy(&out.stderr));
        let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", kind);
        test_harness::wait_until(test_harness::DEFAULT_TIMEOUT, "the API server serves the kind", async || {
            discovery::pinned_kind(client, &gvk).await.is_ok()
        })
        .await?;
    }
    Ok(())
}
