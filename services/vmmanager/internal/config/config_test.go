package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // substring of the error
	}{
		{"empty", ``, "pools: config is empty"},
		{"no pools", `pools: []`, "pools: at least one pool"},
		{"unknown key", "pools:\n  - name: a\n    provider: process\n    size: 1\n    sise: 2\n", "line 5: unknown key \"sise\""},
		{"bad name", "pools:\n  - name: A B\n    provider: process\n    size: 1\n", "pools[0].name"},
		{"zero size", "pools:\n  - name: a\n    provider: process\n    size: 0\n", "pools[0].size: must be >= 1"},
		{"negative spares", "pools:\n  - name: a\n    provider: process\n    size: 1\n    warm_spares: -1\n", "pools[0].warm_spares"},
		{"huge", "pools:\n  - name: a\n    provider: process\n    size: 1000\n", "pools[0].size: size + warm_spares must be <= 256"},
		{"size + spares overflow", "pools:\n  - name: a\n    provider: process\n    size: 9223372036854775807\n    warm_spares: 1\n", "pools[0].size: size + warm_spares must be <= 256"},
		{"spares overflow", "pools:\n  - name: a\n    provider: process\n    size: 1\n    warm_spares: 9223372036854775807\n", "pools[0].size: size + warm_spares must be <= 256"},
		{"bad provider", "pools:\n  - name: a\n    provider: aws\n    size: 1\n", "pools[0].provider: must be one of"},
		{"wrong section", "pools:\n  - name: a\n    provider: process\n    size: 1\n    docker: {}\n", "pools[0].docker: section given but provider is \"process\""},
		{"duplicate", "pools:\n  - name: a\n    provider: process\n    size: 1\n  - name: a\n    provider: process\n    size: 1\n", "pools[1].name: duplicate"},
		{"bad duration", "pools:\n  - name: a\n    provider: process\n    size: 1\n    boot_timeout: soon\n", "is not a duration"},
		{"relative guest home", "pools:\n  - name: a\n    provider: process\n    size: 1\n    process:\n      guest_home: home/user\n", "pools[0].process.guest_home: must be an absolute path"},
		{"bad screen", "pools:\n  - name: a\n    provider: process\n    size: 1\n    screen_width: 10\n", "pools[0].screen_width"},
		{"static count", "pools:\n  - name: a\n    provider: static\n    size: 2\n    static:\n      endpoints: [http://h:5000]\n", "pools[0].static.endpoints: needs one endpoint per VM"},
		{"static url", "pools:\n  - name: a\n    provider: static\n    size: 1\n    static:\n      endpoints: [h:5000]\n", "pools[0].static.endpoints[0]: must be an http(s) URL"},
		{"static missing", "pools:\n  - name: a\n    provider: static\n    size: 1\n", "pools[0].static: required"},
		{"osworld qcow2", "pools:\n  - name: a\n    provider: docker\n    size: 1\n    docker:\n      flavor: osworld\n", "pools[0].docker.qcow2: required"},
		{"docker flavor", "pools:\n  - name: a\n    provider: docker\n    size: 1\n    docker:\n      flavor: qemu\n", "pools[0].docker.flavor"},
		{"docker kvm", "pools:\n  - name: a\n    provider: docker\n    size: 1\n    docker:\n      kvm: maybe\n", "pools[0].docker.kvm"},
		{"docker token in args", "pools:\n  - name: a\n    provider: docker\n    size: 1\n    docker:\n      args: [--xvfb, --token=s3cret]\n", "pools[0].docker.args[1]: must not pass --token"},
		{"vmware vms", "pools:\n  - name: a\n    provider: vmware\n    size: 2\n    vmware:\n      vms: [a.vmx]\n", "pools[0].vmware.vms: needs one .vmx path per VM"},
		{"vmware type", "pools:\n  - name: a\n    provider: vmware\n    size: 1\n    path_to_vm: a.vmx\n    vmware:\n      type: player\n", "pools[0].vmware.type"},
		{"vbox port", "pools:\n  - name: a\n    provider: virtualbox\n    size: 1\n    virtualbox:\n      vms: [u]\n      guest_port: 70000\n", "pools[0].virtualbox.guest_port"},
		{"process port", "pools:\n  - name: a\n    provider: process\n    size: 1\n    process:\n      base_port: -3\n", "pools[0].process.base_port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	pools, err := Parse([]byte(`pools:
  - name: local
    provider: process
    size: 2
  - name: osw
    provider: docker
    size: 1
    warm_spares: 1
    docker:
      flavor: osworld
      qcow2: /data/Ubuntu.qcow2
  - name: vm
    provider: vmware
    size: 1
    path_to_vm: /vms/Ubuntu0.vmx
`))
	if err != nil {
		t.Fatal(err)
	}
	p := pools[0]
	if p.ScreenWidth != 1920 || p.ScreenHeight != 1080 || p.OSType != "Debian" || p.Process.BasePort != 5100 ||
		p.Process.Host != "127.0.0.1" || time.Duration(p.HealthInterval) != 15*time.Second {
		t.Errorf("process defaults = %+v %+v", p, *p.Process)
	}
	if pools[1].OSType != "Ubuntu" {
		t.Errorf("OSWorld image pool os_type = %q, want Ubuntu", pools[1].OSType)
	}
	d := pools[1].Docker
	if d.Image != "happysixd/osworld-docker" || d.DiskSize != "32G" || d.KVM != "auto" {
		t.Errorf("osworld defaults = %+v", *d)
	}
	v := pools[2]
	if len(v.VMware.VMs) != 1 || v.VMware.VMs[0] != "/vms/Ubuntu0.vmx" || v.SnapshotName != "init_state" || v.VMware.Type != "ws" {
		t.Errorf("vmware defaults = %+v %+v", v, *v.VMware)
	}
	var fe *FieldError
	if err := Validate([]Pool{{Name: "x", Provider: "process", Size: -1}}); !errors.As(err, &fe) || fe.Key != "pools[0].size" {
		t.Errorf("Validate error = %v, want a FieldError on pools[0].size", err)
	}
}
