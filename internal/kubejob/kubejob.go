// Package kubejob writes a distributed load's workers as a Kubernetes
// Indexed Job: N pods of the agent's image, each running the same
// netdoctor command with its share (--segment INDEX/N, from the Job's
// completion index) and one start time. The manifest is made from the
// few local types below, in the API's field names, rather than from
// k8s.io/api, which would more than double the binary for one printed
// object; the tests decode it strictly with the API's own types.
package kubejob

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Image is the agent's image (deploy/kubernetes/daemonset.yaml): the
// workers run the same netdoctor.
const Image = "ghcr.io/netdoctor/netdoctor:latest"

// Binary is netdoctor's path in the image.
const Binary = "/usr/local/bin/netdoctor"

// IndexEnv is the variable the Job controller sets to a pod's
// completion index, 0 to N-1; the workers' --segment reads it with
// --segment-base 0.
const IndexEnv = "JOB_COMPLETION_INDEX"

// Spec is what the Job runs.
type Spec struct {
	// Name of the Job, and the label its pods carry.
	Name, Namespace string
	Image           string
	// Workers is N, the pods that each send 1/N of the load.
	Workers int
	// Args are netdoctor's arguments before the worker's own (the
	// command, its load flags); Target goes last.
	Args   []string
	Target string
	// StartAt is when every worker starts; Run how long one runs at
	// most once started (its duration and a request's timeout).
	StartAt time.Time
	Run     time.Duration
	// Threads is each worker's event-loop threads, Connections its
	// share of the connections: its CPU and memory follow.
	Threads, Connections int
}

// Job is batch/v1 Job, in the fields this package writes.
type Job struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   Meta    `yaml:"metadata"`
	Spec       JobSpec `yaml:"spec"`
}

// Meta is ObjectMeta.
type Meta struct {
	Name        string            `yaml:"name,omitempty"`
	Namespace   string            `yaml:"namespace,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// JobSpec is batch/v1 JobSpec.
type JobSpec struct {
	CompletionMode          string      `yaml:"completionMode"`
	Completions             int         `yaml:"completions"`
	Parallelism             int         `yaml:"parallelism"`
	BackoffLimit            int         `yaml:"backoffLimit"`
	ActiveDeadlineSeconds   int64       `yaml:"activeDeadlineSeconds"`
	TTLSecondsAfterFinished int         `yaml:"ttlSecondsAfterFinished"`
	Template                PodTemplate `yaml:"template"`
}

// PodTemplate is PodTemplateSpec.
type PodTemplate struct {
	Metadata Meta    `yaml:"metadata"`
	Spec     PodSpec `yaml:"spec"`
}

// PodSpec is the part of core/v1 PodSpec a worker needs.
type PodSpec struct {
	RestartPolicy                 string      `yaml:"restartPolicy"`
	ServiceAccountName            string      `yaml:"serviceAccountName,omitempty"`
	AutomountServiceAccountToken  bool        `yaml:"automountServiceAccountToken"`
	EnableServiceLinks            bool        `yaml:"enableServiceLinks"`
	TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               PodSecurity `yaml:"securityContext"`
	TopologySpreadConstraints     []Spread    `yaml:"topologySpreadConstraints"`
	Containers                    []Container `yaml:"containers"`
}

// PodSecurity is PodSecurityContext.
type PodSecurity struct {
	RunAsNonRoot   bool    `yaml:"runAsNonRoot"`
	RunAsUser      int64   `yaml:"runAsUser"`
	RunAsGroup     int64   `yaml:"runAsGroup"`
	SeccompProfile Seccomp `yaml:"seccompProfile"`
}

// Seccomp is SeccompProfile.
type Seccomp struct {
	Type string `yaml:"type"`
}

// Spread is TopologySpreadConstraint: workers on different nodes where
// the cluster has them, so that they add up to more than one host.
type Spread struct {
	MaxSkew           int      `yaml:"maxSkew"`
	TopologyKey       string   `yaml:"topologyKey"`
	WhenUnsatisfiable string   `yaml:"whenUnsatisfiable"`
	LabelSelector     Selector `yaml:"labelSelector"`
}

// Selector is LabelSelector.
type Selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

// Container is the part of core/v1 Container a worker needs.
type Container struct {
	Name            string            `yaml:"name"`
	Image           string            `yaml:"image"`
	ImagePullPolicy string            `yaml:"imagePullPolicy"`
	Command         []string          `yaml:"command"`
	Args            []string          `yaml:"args"`
	Env             []Env             `yaml:"env"`
	Resources       Resources         `yaml:"resources"`
	SecurityContext ContainerSecurity `yaml:"securityContext"`
}

// Env is EnvVar, from a field of the pod.
type Env struct {
	Name      string     `yaml:"name"`
	ValueFrom *ValueFrom `yaml:"valueFrom,omitempty"`
}

// ValueFrom is EnvVarSource: a field of the pod, or a Secret's key.
type ValueFrom struct {
	FieldRef     *FieldRef `yaml:"fieldRef,omitempty"`
	SecretKeyRef *KeyRef   `yaml:"secretKeyRef,omitempty"`
}

// KeyRef is SecretKeySelector.
type KeyRef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

// FieldRef is ObjectFieldSelector.
type FieldRef struct {
	FieldPath string `yaml:"fieldPath"`
}

// Resources is ResourceRequirements.
type Resources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

// ContainerSecurity is SecurityContext: a load needs no privilege.
type ContainerSecurity struct {
	AllowPrivilegeEscalation bool         `yaml:"allowPrivilegeEscalation"`
	Privileged               bool         `yaml:"privileged"`
	ReadOnlyRootFilesystem   bool         `yaml:"readOnlyRootFilesystem"`
	Capabilities             Capabilities `yaml:"capabilities"`
}

// Capabilities is core/v1 Capabilities.
type Capabilities struct {
	Drop []string `yaml:"drop"`
}

// nonRoot is the worker's user: the "nonroot" user of distroless
// images, owning nothing in the image.
const nonRoot = 65532

// slack is what a Job may run past its workers' start and run: pods
// reaped, logs flushed.
const slack = 2 * time.Minute

// New makes the Job of s, as of now (its deadline counts from when it
// is applied, which is about now: the start is some margin ahead).
func New(s Spec, now time.Time) (*Job, error) {
	switch {
	case s.Workers < 1:
		return nil, fmt.Errorf("workers: %d, want at least 1", s.Workers)
	case s.Name == "" || len(s.Name) > 52 || strings.Trim(s.Name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || s.Name[0] == '-' || s.Name[len(s.Name)-1] == '-':
		// 63 less the pods' suffix: the index and a random part.
		return nil, fmt.Errorf("job name %q: want lower-case letters, digits and '-', at most 52", s.Name)
	case !s.StartAt.After(now):
		return nil, fmt.Errorf("start %s is not ahead of now", s.StartAt.Format(time.RFC3339))
	}
	image := s.Image
	if image == "" {
		image = Image
	}
	labels := map[string]string{"app.kubernetes.io/name": "netdoctor", "app.kubernetes.io/component": "load-worker", "netdoctor.io/job": s.Name}
	args := append(append([]string{}, s.Args...),
		"--segment", "$("+IndexEnv+")/"+strconv.Itoa(s.Workers), "--segment-base", "0",
		"--start-at", s.StartAt.UTC().Format(time.RFC3339Nano), "--json", "-", s.Target)
	deadline := s.StartAt.Sub(now) + s.Run + slack
	// A thread of event loop each and one for the runtime; memory for
	// the histograms and each connection's buffers.
	cpu := strconv.Itoa(max(s.Threads, 1) + 1)
	mem := fmt.Sprintf("%dMi", 128+s.Connections/16)
	job := &Job{APIVersion: "batch/v1", Kind: "Job",
		Metadata: Meta{Name: s.Name, Namespace: s.Namespace, Labels: labels,
			Annotations: map[string]string{"netdoctor.io/start-at": s.StartAt.UTC().Format(time.RFC3339Nano)}},
		Spec: JobSpec{CompletionMode: "Indexed", Completions: s.Workers, Parallelism: s.Workers, BackoffLimit: 0,
			ActiveDeadlineSeconds: int64((deadline + time.Second - 1) / time.Second), TTLSecondsAfterFinished: 3600,
			Template: PodTemplate{Metadata: Meta{Labels: labels}, Spec: PodSpec{
				RestartPolicy: "Never", TerminationGracePeriodSeconds: 5,
				SecurityContext: PodSecurity{RunAsNonRoot: true, RunAsUser: nonRoot, RunAsGroup: nonRoot, SeccompProfile: Seccomp{Type: "RuntimeDefault"}},
				TopologySpreadConstraints: []Spread{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: "ScheduleAnyway",
					LabelSelector: Selector{MatchLabels: map[string]string{"netdoctor.io/job": s.Name}}}},
				Containers: []Container{{Name: "worker", Image: image, ImagePullPolicy: "IfNotPresent",
					Command: []string{Binary}, Args: args,
					Env: []Env{{Name: IndexEnv, ValueFrom: &ValueFrom{FieldRef: &FieldRef{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}},
					// Requests equal to limits: a worker throttled by
					// its limit would be the bottleneck it must not be.
					Resources:       Resources{Requests: map[string]string{"cpu": cpu, "memory": mem}, Limits: map[string]string{"cpu": cpu, "memory": mem}},
					SecurityContext: ContainerSecurity{ReadOnlyRootFilesystem: true, Capabilities: Capabilities{Drop: []string{"ALL"}}},
				}},
			}}}}
	return job, nil
}

// YAML is the Job as `kubectl apply -f -` reads it.
func (j *Job) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ControllerSpec is the pod that runs a distributed search or run:
// `capacity` or `run --workers N --kube-api in-cluster`, creating its
// workers' Jobs through the API with the service account ControllerRBAC
// makes.
type ControllerSpec struct {
	// Name of the Job, and of the service account it runs as.
	Name, Namespace, Image string
	// Args are netdoctor's arguments (the command first).
	Args []string
	// Run bounds the whole search (its --max-duration and the last
	// step's Job).
	Run time.Duration
	// TokenEnv, when set, is the variable the agent's token is read
	// from (--token-env), set from the Secret TokenSecret's key "token":
	// the agent's own (deploy/kubernetes), copied to this namespace.
	TokenEnv string
}

// TokenSecret is the Secret that holds the agent's token, key "token"
// (deploy/kubernetes/daemonset.yaml).
const TokenSecret = "netdoctor-token"

// Controller makes the Job of one pod that runs c: no privilege, the
// service account's token mounted (its only credential), one CPU for
// the search and the diagnosis's own load.
func Controller(c ControllerSpec) (*Job, error) {
	if c.Name == "" || len(c.Name) > 52 || strings.Trim(c.Name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || c.Name[0] == '-' || c.Name[len(c.Name)-1] == '-' {
		return nil, fmt.Errorf("job name %q: want lower-case letters, digits and '-', at most 52", c.Name)
	}
	image := c.Image
	if image == "" {
		image = Image
	}
	labels := map[string]string{"app.kubernetes.io/name": "netdoctor", "app.kubernetes.io/component": "capacity-controller", jobLabel: c.Name}
	res := map[string]string{"cpu": "1", "memory": "512Mi"}
	env := []Env{}
	if c.TokenEnv != "" {
		env = append(env, Env{Name: c.TokenEnv, ValueFrom: &ValueFrom{SecretKeyRef: &KeyRef{Name: TokenSecret, Key: "token"}}})
	}
	return &Job{APIVersion: "batch/v1", Kind: "Job",
		Metadata: Meta{Name: c.Name, Namespace: c.Namespace, Labels: labels},
		Spec: JobSpec{CompletionMode: "NonIndexed", Completions: 1, Parallelism: 1, BackoffLimit: 0,
			ActiveDeadlineSeconds: int64((c.Run + slack + time.Second - 1) / time.Second), TTLSecondsAfterFinished: 3600,
			Template: PodTemplate{Metadata: Meta{Labels: labels}, Spec: PodSpec{
				RestartPolicy: "Never", ServiceAccountName: c.Name, AutomountServiceAccountToken: true, TerminationGracePeriodSeconds: 30,
				SecurityContext: PodSecurity{RunAsNonRoot: true, RunAsUser: nonRoot, RunAsGroup: nonRoot, SeccompProfile: Seccomp{Type: "RuntimeDefault"}},
				Containers: []Container{{Name: "controller", Image: image, ImagePullPolicy: "IfNotPresent",
					Command: []string{Binary}, Args: c.Args, Env: env,
					Resources:       Resources{Requests: res, Limits: res},
					SecurityContext: ContainerSecurity{ReadOnlyRootFilesystem: true, Capabilities: Capabilities{Drop: []string{"ALL"}}},
				}},
			}}}}, nil
}
