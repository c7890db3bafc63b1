package kubejob

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// Rule is rbac/v1 PolicyRule.
type Rule struct {
	APIGroups []string `yaml:"apiGroups"`
	Resources []string `yaml:"resources"`
	Verbs     []string `yaml:"verbs"`
}

// Subject is rbac/v1 Subject.
type Subject struct {
	Kind      string `yaml:"kind"`
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace,omitempty"`
}

// RoleRef is rbac/v1 RoleRef.
type RoleRef struct {
	APIGroup string `yaml:"apiGroup"`
	Kind     string `yaml:"kind"`
	Name     string `yaml:"name"`
}

// ControllerRules are all a capacity controller does in its namespace:
// create each step's Job, watch it complete and delete it, find its pods
// and read their logs (the workers' results). Nothing cluster-wide, no
// secrets, no pods created directly.
var ControllerRules = []Rule{
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
}

// ControllerRBAC is the ServiceAccount, Role and RoleBinding a
// controller pod named name in namespace (empty: kubectl's) needs to run
// capacity --workers as one Job a step, as YAML documents.
func ControllerRBAC(name, namespace string) ([]byte, error) {
	meta := Meta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/name": "netdoctor", "app.kubernetes.io/component": "capacity-controller"}}
	docs := []any{
		struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   Meta   `yaml:"metadata"`
		}{"v1", "ServiceAccount", meta},
		struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   Meta   `yaml:"metadata"`
			Rules      []Rule `yaml:"rules"`
		}{"rbac.authorization.k8s.io/v1", "Role", meta, ControllerRules},
		struct {
			APIVersion string    `yaml:"apiVersion"`
			Kind       string    `yaml:"kind"`
			Metadata   Meta      `yaml:"metadata"`
			Subjects   []Subject `yaml:"subjects"`
			RoleRef    RoleRef   `yaml:"roleRef"`
		}{"rbac.authorization.k8s.io/v1", "RoleBinding", meta,
			[]Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
			RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}},
	}
	var b bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
