package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// nginxConf is a plain reverse proxy with upstream keep-alive (without it
// nginx would open a TCP connection per request and lose on that alone).
const nginxConf = `daemon off;
worker_processes %d;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  # Request bodies are read whole into memory, as the gateway reads
  # them, up to the gateway's default limit: with nginx's defaults a
  # screenshot-sized body goes to a temporary file first.
  client_body_buffer_size 64m;
  client_max_body_size 64m;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  upstream fake { server %[3]s; keepalive 512; }
  server {
    listen %[4]s;
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`

// nginx is a running nginx.
type nginx struct {
	addr string
	cmd  *exec.Cmd
	done chan error
}

// startNginx runs nginx in front of upstream with a generated config in a
// temporary directory; place puts it on its CPUs.
func startNginx(ctx context.Context, place func(string, ...string) (string, []string), bin, upstream string, workers int) (*nginx, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("nginx not found (Debian package nginx): %w", err)
	}
	dir, err := os.MkdirTemp("", "benchgateway-nginx-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, workers, dir, upstream, addr), 0o600); err != nil {
		return nil, err
	}
	name, args := place(path, "-c", conf, "-p", dir, "-e", filepath.Join(dir, "error.log"))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	n := &nginx{addr: addr, cmd: cmd, done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		os.RemoveAll(dir)
		n.done <- err
	}()
	for deadline := time.Now().Add(nginxStartTimeout); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return n, nil
		}
		select {
		case err := <-n.done:
			return nil, fmt.Errorf("nginx exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			n.stop()
			return nil, fmt.Errorf("nginx did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nginxStartTimeout and nginxStopTimeout bound nginx's start and exit
// (longer under valgrind).
var nginxStartTimeout, nginxStopTimeout = 5 * time.Second, 3 * time.Second

func (n *nginx) stop() {
	n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.done:
	case <-time.After(nginxStopTimeout):
		n.cmd.Process.Kill()
		<-n.done
	}
}
