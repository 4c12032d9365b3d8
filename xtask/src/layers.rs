//! `cargo xtask lint-layers`: the crate layering of SPEC §1, checked against `cargo metadata`.
//!
//! The allowed graph is [`LAYERS`], one table. Three rules:
//!
//! 1. Every edge between workspace crates (normal, dev or build) is in the table. Dev edges
//!    follow the same table, plus [`LAYERS`]' `dev_extra`, so a test cannot couple two crates
//!    that the code keeps apart.
//! 2. `hyper` and `fred` are reachable — directly, or through any third-party crate such as an
//!    HTTP client built on hyper — only from the crates whose job they are ([`CONFINED`]).
//!    Reaching them through another workspace crate is fine: the facade gets hyper through
//!    transports, which is the point of the layering.
//! 3. Crates with a closed list of third-party dependencies ([`LAYERS`]' `third_party`) use
//!    only those (SPEC §1: `deadline` imports only `errors` and tokio).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// One workspace crate's place in the layering.
pub(crate) struct Layer {
    /// The package name.
    pub(crate) name: &'static str,
    /// Workspace crates it may depend on.
    pub(crate) allowed: &'static [&'static str],
    /// Workspace crates it may also dev-depend on.
    pub(crate) dev_extra: &'static [&'static str],
    /// When set, the only third-party crates it may depend on directly (normal edges).
    pub(crate) third_party: Option<&'static [&'static str]>,
    /// Why, for the violation message.
    pub(crate) why: &'static str,
}

const ERRORS: &str = "polygateway-errors";
const PORTS: &str = "polygateway-ports";
const DEADLINE: &str = "polygateway-deadline";
const MIDDLEWARE: &str = "polygateway-middleware";
const TRANSPORTS: &str = "polygateway-transports";
const BACKENDS: &str = "polygateway-backends";
const FACADE: &str = "polygateway";
const CLI: &str = "polygateway-cli";
const MOCK: &str = "polygateway-mock";
const TESTS: &str = "polygateway-tests";
const XTASK: &str = "xtask";
const BENCH: &str = "polygateway-bench";

/// The allowed graph (SPEC §1).
pub(crate) const LAYERS: &[Layer] = &[
    Layer {
        name: ERRORS,
        allowed: &[],
        dev_extra: &[],
        third_party: None,
        why: "the error taxonomy is the bottom layer",
    },
    Layer {
        name: PORTS,
        allowed: &[ERRORS],
        dev_extra: &[],
        third_party: None,
        why: "ports are traits and plain data over the errors",
    },
    Layer {
        name: DEADLINE,
        allowed: &[ERRORS],
        dev_extra: &[],
        third_party: Some(&["tokio"]),
        why: "the deadline imports only errors and tokio",
    },
    Layer {
        name: MIDDLEWARE,
        allowed: &[ERRORS, PORTS],
        dev_extra: &[],
        third_party: None,
        why: "the pipeline knows only ports; transports and backends are plugged in by the facade",
    },
    Layer {
        name: TRANSPORTS,
        allowed: &[ERRORS, PORTS],
        dev_extra: &[MOCK],
        third_party: None,
        why: "transports know HTTP and ports, nothing of the pipeline or backends",
    },
    Layer {
        name: BACKENDS,
        allowed: &[ERRORS, PORTS],
        dev_extra: &[],
        third_party: None,
        why: "backends implement ports, nothing of the pipeline or HTTP",
    },
    Layer {
        name: FACADE,
        allowed: &[ERRORS, PORTS, DEADLINE, MIDDLEWARE, TRANSPORTS, BACKENDS],
        dev_extra: &[MOCK],
        third_party: None,
        why: "the facade assembles the layers",
    },
    Layer {
        name: CLI,
        allowed: &[FACADE, MOCK],
        dev_extra: &[],
        third_party: None,
        why: "the CLI uses the public API and embeds the mock upstream",
    },
    Layer {
        name: MOCK,
        allowed: &[],
        dev_extra: &[],
        third_party: None,
        why: "the mock upstream is the far side of the wire and shares only the protocol",
    },
    Layer {
        name: TESTS,
        allowed: &[],
        dev_extra: &[
            ERRORS, PORTS, DEADLINE, MIDDLEWARE, TRANSPORTS, BACKENDS, FACADE, MOCK,
        ],
        third_party: None,
        why: "cross-crate tests dev-depend on the library",
    },
    Layer {
        name: BENCH,
        allowed: &[FACADE, PORTS, TRANSPORTS],
        dev_extra: &[],
        third_party: None,
        why: "the benchmark driver measures the public API against a bare transport",
    },
    Layer {
        name: XTASK,
        allowed: &[],
        dev_extra: &[],
        third_party: None,
        why: "developer commands stand apart from the library",
    },
];

/// Third-party crates confined to the crates whose job they are: (crate, normal holders,
/// extra dev holders).
pub(crate) const CONFINED: &[(&str, &[&str], &[&str])] = &[
    ("hyper", &[TRANSPORTS, CLI, MOCK], &[]),
    ("fred", &[BACKENDS], &[TESTS]),
];

/// A broken rule, printed as `FROM -> TO: not allowed (reason)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Violation {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) reason: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} -> {}: not allowed ({})",
            self.from, self.to, self.reason
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EdgeKind {
    Normal,
    Dev,
    Build,
}

impl EdgeKind {
    fn suffix(self) -> &'static str {
        match self {
            EdgeKind::Normal => "",
            EdgeKind::Dev => " (dev)",
            EdgeKind::Build => " (build)",
        }
    }
}

/// The dependency graph read from `cargo metadata --format-version 1` (with the resolve).
struct Graph {
    names: BTreeMap<String, String>,
    members: BTreeSet<String>,
    edges: BTreeMap<String, Vec<(String, EdgeKind)>>,
}

impl Graph {
    fn from_metadata(metadata: &Value) -> Result<Graph, String> {
        let packages = metadata["packages"]
            .as_array()
            .ok_or("metadata has no packages")?;
        let mut names = BTreeMap::new();
        for package in packages {
            let id = package["id"].as_str().ok_or("package without id")?;
            let name = package["name"].as_str().ok_or("package without name")?;
            names.insert(id.to_owned(), name.to_owned());
        }
        let members = metadata["workspace_members"]
            .as_array()
            .ok_or("metadata has no workspace_members")?
            .iter()
            .filter_map(|m| m.as_str().map(str::to_owned))
            .collect();
        let nodes = metadata["resolve"]["nodes"]
            .as_array()
            .ok_or("metadata has no resolve graph (do not pass --no-deps)")?;
        let mut edges = BTreeMap::new();
        for node in nodes {
            let id = node["id"].as_str().ok_or("node without id")?.to_owned();
            let mut out = Vec::new();
            for dep in node["deps"].as_array().into_iter().flatten() {
                let pkg = dep["pkg"].as_str().ok_or("dep without pkg")?;
                for kind in dep["dep_kinds"].as_array().into_iter().flatten() {
                    let kind = match kind["kind"].as_str() {
                        None => EdgeKind::Normal,
                        Some("dev") => EdgeKind::Dev,
                        Some("build") => EdgeKind::Build,
                        Some(other) => return Err(format!("unknown dependency kind {other}")),
                    };
                    if !out.contains(&(pkg.to_owned(), kind)) {
                        out.push((pkg.to_owned(), kind));
                    }
                }
            }
            edges.insert(id, out);
        }
        Ok(Graph {
            names,
            members,
            edges,
        })
    }

    fn name<'a>(&'a self, id: &'a str) -> &'a str {
        self.names.get(id).map_or(id, String::as_str)
    }

    /// A path from `start`'s `kind` dependencies to a package named `target`, not passing
    /// through workspace crates (each of those is checked on its own).
    fn third_party_path(&self, start: &str, kind: EdgeKind, target: &str) -> Option<Vec<String>> {
        let mut stack: Vec<(String, Vec<String>)> = self.edges[start]
            .iter()
            .filter(|(dep, k)| *k == kind && !self.members.contains(dep))
            .map(|(dep, _)| (dep.clone(), vec![self.name(dep).to_owned()]))
            .collect();
        let mut seen = BTreeSet::new();
        while let Some((id, path)) = stack.pop() {
            if self.name(&id) == target {
                return Some(path);
            }
            if !seen.insert(id.clone()) {
                continue;
            }
            for (dep, k) in self.edges.get(&id).into_iter().flatten() {
                if *k != EdgeKind::Build && !self.members.contains(dep) {
                    let mut next = path.clone();
                    next.push(self.name(dep).to_owned());
                    stack.push((dep.clone(), next));
                }
            }
        }
        None
    }
}

/// Every violation of the layering in `metadata`, sorted.
pub(crate) fn check(metadata: &Value) -> Result<Vec<Violation>, String> {
    let graph = Graph::from_metadata(metadata)?;
    let mut violations = BTreeSet::new();
    for member in &graph.members {
        let from = graph.name(member);
        let Some(layer) = LAYERS.iter().find(|l| l.name == from) else {
            violations.insert(Violation {
                from: from.to_owned(),
                to: "*".to_owned(),
                reason: "crate is not in the layer table; add it to xtask/src/layers.rs".to_owned(),
            });
            continue;
        };
        for (dep, kind) in &graph.edges[member] {
            let to = graph.name(dep);
            if graph.members.contains(dep) {
                let allowed = layer.allowed.contains(&to)
                    || (*kind == EdgeKind::Dev && layer.dev_extra.contains(&to));
                if !allowed {
                    let may: Vec<&str> = layer.allowed.to_vec();
                    violations.insert(Violation {
                        from: from.to_owned(),
                        to: format!("{to}{}", kind.suffix()),
                        reason: format!(
                            "{}; {from} may depend on: {}",
                            layer.why,
                            if may.is_empty() {
                                "nothing in the workspace".to_owned()
                            } else {
                                may.join(", ")
                            }
                        ),
                    });
                }
            } else if let (EdgeKind::Normal, Some(closed)) = (kind, layer.third_party) {
                if !closed.contains(&to) {
                    violations.insert(Violation {
                        from: from.to_owned(),
                        to: to.to_owned(),
                        reason: format!(
                            "{}; its only third-party dependencies: {}",
                            layer.why,
                            closed.join(", ")
                        ),
                    });
                }
            }
        }
        for (confined, holders, dev_holders) in CONFINED {
            for kind in [EdgeKind::Normal, EdgeKind::Dev] {
                let held = holders.contains(&from)
                    || (kind == EdgeKind::Dev && dev_holders.contains(&from));
                if held {
                    continue;
                }
                if let Some(path) = graph.third_party_path(member, kind, confined) {
                    violations.insert(Violation {
                        from: from.to_owned(),
                        to: format!("{confined}{}", kind.suffix()),
                        reason: format!(
                            "{confined} belongs only in {}; reached via {}",
                            holders.join(", "),
                            path.join(" -> ")
                        ),
                    });
                }
            }
        }
    }
    Ok(violations.into_iter().collect())
}

/// Run `cargo metadata` on the workspace and check it.
pub(crate) fn check_workspace() -> Result<Vec<Violation>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(crate::workspace_root())
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata printed invalid JSON: {e}"))?;
    check(&metadata)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Build metadata for `packages` (name → [(dep, kind)]), where names starting with `ext:`
    /// are third-party crates outside the workspace.
    /// A package and its dependencies: (dependency, kind), kind `None` for normal.
    type Package<'a> = (&'a str, &'a [(&'a str, Option<&'a str>)]);

    fn metadata(packages: &[Package<'_>]) -> Value {
        let id = |name: &str| match name.strip_prefix("ext:") {
            Some(n) => format!("registry+https://example.invalid#{n}@1.0.0"),
            None => format!("path+file:///ws/{name}#{name}@0.1.0"),
        };
        let plain = |name: &str| name.trim_start_matches("ext:").to_owned();
        let all: BTreeSet<&str> = packages
            .iter()
            .flat_map(|(n, deps)| std::iter::once(*n).chain(deps.iter().map(|(d, _)| *d)))
            .collect();
        json!({
            "packages": all.iter().map(|n| json!({"id": id(n), "name": plain(n)})).collect::<Vec<_>>(),
            "workspace_members": all.iter().filter(|n| !n.starts_with("ext:")).map(|n| id(n)).collect::<Vec<_>>(),
            "resolve": {"nodes": all.iter().map(|n| {
                let deps = packages.iter().find(|(p, _)| p == n).map_or(&[][..], |(_, d)| *d);
                json!({"id": id(n), "deps": deps.iter().map(|(d, k)| json!({
                    "pkg": id(d), "dep_kinds": [{"kind": k}]
                })).collect::<Vec<_>>()})
            }).collect::<Vec<_>>()}
        })
    }

    fn lines(metadata: &Value) -> Vec<String> {
        check(metadata)
            .expect("valid metadata")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_real_workspace_passes() {
        let violations = check_workspace().expect("cargo metadata");
        assert_eq!(violations, Vec::new());
    }

    #[test]
    fn middleware_depending_on_transports_fails_and_names_the_edge() {
        let meta = metadata(&[
            (ERRORS, &[]),
            (PORTS, &[(ERRORS, None)]),
            (TRANSPORTS, &[(ERRORS, None), (PORTS, None)]),
            (
                MIDDLEWARE,
                &[(ERRORS, None), (PORTS, None), (TRANSPORTS, None)],
            ),
        ]);
        assert_eq!(
            lines(&meta),
            [
                "polygateway-middleware -> polygateway-transports: not allowed (the pipeline knows \
              only ports; transports and backends are plugged in by the facade; \
              polygateway-middleware may depend on: polygateway-errors, polygateway-ports)"
            ]
        );
    }

    #[test]
    fn allowed_edges_pass() {
        let meta = metadata(&[
            (ERRORS, &[("ext:thiserror", None)]),
            (PORTS, &[(ERRORS, None)]),
            (DEADLINE, &[(ERRORS, None), ("ext:tokio", None)]),
            (FACADE, &[(PORTS, None), (TRANSPORTS, None)]),
            (TRANSPORTS, &[(ERRORS, None), ("ext:hyper", None)]),
            (CLI, &[(FACADE, None)]),
            (TESTS, &[(FACADE, Some("dev")), (BACKENDS, Some("dev"))]),
        ]);
        assert_eq!(lines(&meta), Vec::<String>::new());
    }

    #[test]
    fn dev_edges_follow_the_table() {
        let meta = metadata(&[(BACKENDS, &[(MIDDLEWARE, Some("dev"))])]);
        assert_eq!(
            lines(&meta),
            [
                "polygateway-backends -> polygateway-middleware (dev): not allowed (backends \
              implement ports, nothing of the pipeline or HTTP; polygateway-backends may depend \
              on: polygateway-errors, polygateway-ports)"
            ]
        );
    }

    #[test]
    fn hyper_outside_transports_fails_even_through_a_third_party_crate() {
        let meta = metadata(&[
            (MIDDLEWARE, &[("ext:reqwest", None)]),
            ("ext:reqwest", &[("ext:hyper", None)]),
            (BACKENDS, &[("ext:fred", None)]),
            (PORTS, &[("ext:fred", Some("dev"))]),
        ]);
        assert_eq!(
            lines(&meta),
            [
                "polygateway-middleware -> hyper: not allowed (hyper belongs only in \
                 polygateway-transports, polygateway-cli, polygateway-mock; reached via reqwest \
                 -> hyper)",
                "polygateway-ports -> fred (dev): not allowed (fred belongs only in \
                 polygateway-backends; reached via fred)",
            ]
        );
    }

    #[test]
    fn deadline_takes_only_tokio() {
        let meta = metadata(&[(
            DEADLINE,
            &[(ERRORS, None), ("ext:tokio", None), ("ext:chrono", None)],
        )]);
        assert_eq!(
            lines(&meta),
            [
                "polygateway-deadline -> chrono: not allowed (the deadline imports only errors and \
              tokio; its only third-party dependencies: tokio)"
            ]
        );
    }

    #[test]
    fn a_crate_missing_from_the_table_fails() {
        let meta = metadata(&[("polygateway-newthing", &[])]);
        assert_eq!(
            lines(&meta),
            [
                "polygateway-newthing -> *: not allowed (crate is not in the layer table; add it to \
              xtask/src/layers.rs)"
            ]
        );
    }
}
