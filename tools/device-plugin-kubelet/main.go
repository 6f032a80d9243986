// Command device-plugin-kubelet is the kubelet's side of the device-plugin API for one kwok node of the lab cluster.
//
// A kwok node has no kubelet, so nothing would serve the socket NVIDIA's device plugin registers with. This program
// does what the kubelet's device manager does with a plugin, and nothing else: it serves the Registration service on
// DIR/kubelet.sock (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), dials each plugin that registers at the endpoint it
// names, follows its ListAndWatch stream and writes the node's capacity (every device) and allocatable (the healthy
// ones) for that resource through the API server. A resource whose plugin went away and did not register again
// within --grace is removed from the node (the kubelet keeps it as unhealthy for five minutes first). Resources that
// match --prefix and are on the node when the program starts count as gone away at the start. No other resource of
// the node is written. A write the API server does not take is tried again every second until it is, as the kubelet
// keeps syncing its node's status.
//
//	device-plugin-kubelet --node NAME --kubeconfig FILE --dir DIR [--prefix nvidia.com/] [--grace 1s] [--stdin]
//	    [--config-manager PATH [--sidecar-backoff 10s]] -- COMMAND [ARG...]
//	device-plugin-kubelet --once --dir DIR [--quiet 1s] -- COMMAND [ARG...]
//
// COMMAND (the device plugin, in the caller's namespaces) runs as a child, its output on this program's standard
// error; SIGHUP is passed on to it (NVIDIA's plugin restarts its plugins on SIGHUP, as config-manager asks it to),
// SIGTERM and SIGINT stop it and then this program; so does the end of standard input with --stdin (the caller that
// started this program has gone). When the child exits, so does this program, with the child's status.
//
// COMMAND runs with its base name as argv[0] (the operator's entrypoint runs `exec nvidia-device-plugin`), so that
// NVIDIA's config-manager finds it by name. --config-manager runs NVIDIA's config-manager as the operator's
// DaemonSet does (run this program in a PID namespace of its own: config-manager looks for the plugin among all
// processes it sees): once before COMMAND as the init container (ONESHOT=true, SEND_SIGNAL=false; if it fails, this
// program exits 1 without starting COMMAND) and then beside it as the sidecar (ONESHOT=false, SEND_SIGNAL=true,
// SIGNAL=1, PROCESS_TO_SIGNAL=COMMAND's base name), started again --sidecar-backoff after each exit, doubling up
// to five minutes as the kubelet's crash-loop back-off does. The rest of config-manager's environment (NODE_NAME,
// KUBECONFIG, CONFIG_FILE_SRCDIR, CONFIG_FILE_DST, DEFAULT_CONFIG, FALLBACK_STRATEGIES) is this program's own.
//
// --once writes nothing to a cluster: it waits until the plugin has started all its plugins (it has said "Retrieving
// plugins." or "No devices found", and no registration or device list came for --quiet), prints what each resource
// listed as JSON ({"resources": {NAME: {"devices": N, "healthy": H}}}) on standard output, stops the plugin and
// exits 0. A plugin that exits before that makes it exit 1.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type kubelet struct {
	pluginapi.UnimplementedRegistrationServer

	dir    string
	node   string
	grace  time.Duration
	client kubernetes.Interface

	mu sync.Mutex
	// generation of each resource's newest registration: a stream of an older one that ends removes nothing
	generation map[string]int
	live       map[string]bool
	written    map[string][2]int
	// what each resource should be on the node (removed: absent); sync writes the difference, one sync at a time
	want    map[string][2]int
	syncing sync.Mutex
	failing bool
	// once: nothing is written to a cluster; events says a registration or a device list came
	once   bool
	events chan struct{}
}

func (k *kubelet) event() {
	select {
	case k.events <- struct{}{}:
	default:
	}
}

func (k *kubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("device plugin API version %q is not served (%s is)", req.Version, pluginapi.Version)
	}
	if strings.Contains(req.Endpoint, "/") {
		return nil, fmt.Errorf("endpoint %q must be a file name in %s", req.Endpoint, k.dir)
	}
	k.mu.Lock()
	k.generation[req.ResourceName]++
	gen := k.generation[req.ResourceName]
	k.live[req.ResourceName] = true
	k.mu.Unlock()
	log.Printf("registered %s (endpoint %s)", req.ResourceName, req.Endpoint)
	k.event()
	go k.follow(req.ResourceName, filepath.Join(k.dir, req.Endpoint), gen)
	return &pluginapi.Empty{}, nil
}

// follow reads one registration's ListAndWatch stream and writes each list to the node.
func (k *kubelet) follow(resource, endpoint string, gen int) {
	defer k.gone(resource, gen)
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Printf("%s: cannot dial %s: %v", resource, endpoint, err)
		return
	}
	defer conn.Close()
	stream, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		log.Printf("%s: ListAndWatch: %v", resource, err)
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			log.Printf("%s: ListAndWatch stream ended: %v", resource, err)
			return
		}
		healthy := 0
		for _, device := range resp.Devices {
			if device.Health == pluginapi.Healthy {
				healthy++
			}
		}
		k.mu.Lock()
		current := k.generation[resource] == gen
		k.mu.Unlock()
		if current {
			k.write(resource, len(resp.Devices), healthy)
		}
	}
}

// gone starts the grace period of a registration whose stream ended.
func (k *kubelet) gone(resource string, gen int) {
	k.mu.Lock()
	if k.generation[resource] != gen {
		k.mu.Unlock()
		return
	}
	k.live[resource] = false
	k.mu.Unlock()
	time.AfterFunc(k.grace, func() { k.expire(resource, gen) })
}

func (k *kubelet) expire(resource string, gen int) {
	k.mu.Lock()
	stale := k.generation[resource] == gen && !k.live[resource]
	k.mu.Unlock()
	if stale && !k.once {
		k.remove(resource)
	}
}

// patch merges capacity and allocatable into the node's status (a JSON merge patch: other resources stay, null removes).
func (k *kubelet) patch(capacity, allocatable map[string]interface{}) error {
	body, err := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"capacity": capacity, "allocatable": allocatable}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = k.client.CoreV1().Nodes().Patch(ctx, k.node, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

func (k *kubelet) write(resource string, total, healthy int) {
	if k.once {
		k.mu.Lock()
		k.written[resource] = [2]int{total, healthy}
		k.mu.Unlock()
		log.Printf("%s: %d devices, %d healthy", resource, total, healthy)
		k.event()
		return
	}
	k.mu.Lock()
	k.want[resource] = [2]int{total, healthy}
	k.mu.Unlock()
	k.sync()
}

func (k *kubelet) remove(resource string) {
	k.mu.Lock()
	k.want[resource] = removed
	k.mu.Unlock()
	k.sync()
}

// sync writes each resource whose wanted state differs from what was written last. A write that fails (the API
// server away) is tried again every second until it succeeds or another state is wanted, as the kubelet keeps
// syncing its node's status.
func (k *kubelet) sync() {
	k.syncing.Lock()
	defer k.syncing.Unlock()
	k.mu.Lock()
	pending := map[string][2]int{}
	for resource, want := range k.want {
		if written, ok := k.written[resource]; (want == removed && ok) || (want != removed && (!ok || written != want)) {
			pending[resource] = want
		}
	}
	k.mu.Unlock()
	failed := false
	for resource, want := range pending {
		var err error
		if want == removed {
			err = k.patch(map[string]interface{}{resource: nil}, map[string]interface{}{resource: nil})
		} else {
			err = k.patch(map[string]interface{}{resource: fmt.Sprint(want[0])}, map[string]interface{}{resource: fmt.Sprint(want[1])})
		}
		if err != nil {
			if !k.failing {
				log.Printf("%s: cannot write %s's status (trying again every second): %v", resource, k.node, err)
			}
			failed = true
			continue
		}
		k.mu.Lock()
		if want == removed {
			delete(k.written, resource)
		} else {
			k.written[resource] = want
		}
		k.mu.Unlock()
		if want == removed {
			log.Printf("%s: removed from %s (no plugin registered it for %s)", resource, k.node, k.grace)
		} else {
			log.Printf("%s: %s has %d devices, %d healthy", resource, k.node, want[0], want[1])
		}
	}
	if failed && !k.failing {
		time.AfterFunc(time.Second, func() {
			k.syncing.Lock()
			k.failing = false
			k.syncing.Unlock()
			k.sync()
		})
	}
	k.failing = failed || k.failing
}

// adopt treats the node's resources under prefix as registrations that went away at the start.
func (k *kubelet) adopt(prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node, err := k.client.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, list := range []v1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		for key := range list {
			name := string(key)
			if strings.HasPrefix(name, prefix) && !seen[name] {
				seen[name] = true
				k.mu.Lock()
				k.written[name] = [2]int{-2, -2} // on the node, counts unknown: a removal or any count is written
				k.generation[name]++
				gen := k.generation[name]
				k.mu.Unlock()
				k.gone(name, gen)
			}
		}
	}
	return nil
}

// removed is the wanted state of a resource that must leave the node.
var removed = [2]int{-1, -1}

// Lines NVIDIA's device plugin (v0.18.0) logs once it has found its devices: after the first, each plugin with
// devices registers in turn; the second says it has none.
var startedMarkers = []string{"Retrieving plugins.", "No devices found"}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("device-plugin-kubelet: ")
	node := flag.String("node", "", "the node whose status this program writes")
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig of the cluster")
	dir := flag.String("dir", pluginapi.DevicePluginPath, "the device-plugin directory (kubelet.sock is created there)")
	prefix := flag.String("prefix", "nvidia.com/", "the resources the plugins own on the node")
	grace := flag.Duration("grace", time.Second, "how long a resource whose plugin went away stays on the node")
	stdin := flag.Bool("stdin", false, "stop when standard input ends (the caller has gone)")
	once := flag.Bool("once", false, "print what the plugin lists once it has started, write nothing to a cluster, and exit")
	quiet := flag.Duration("quiet", time.Second, "with --once: how long after the last registration or list the plugin counts as started")
	configManager := flag.String("config-manager", "", "NVIDIA's config-manager: run once before COMMAND and then beside it")
	backoff := flag.Duration("sidecar-backoff", 10*time.Second, "with --config-manager: the first wait before the sidecar is started again")
	flag.Parse()
	if flag.NArg() == 0 || (!*once && (*node == "" || *kubeconfig == "")) {
		fmt.Fprintln(os.Stderr, "usage: device-plugin-kubelet --node NAME --kubeconfig FILE --dir DIR [--prefix P] [--grace D] [--stdin] -- COMMAND [ARG...]\n"+
			"           [--config-manager PATH [--sidecar-backoff D]]\n"+
			"       device-plugin-kubelet --once --dir DIR [--quiet D] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	k := &kubelet{dir: *dir, node: *node, grace: *grace, once: *once, events: make(chan struct{}, 1),
		generation: map[string]int{}, live: map[string]bool{}, written: map[string][2]int{}, want: map[string][2]int{}}
	if *configManager != "" {
		if err := initContainer(*configManager); err != nil {
			log.Printf("config-manager (init) failed, %s not started: %v", flag.Arg(0), err)
			os.Exit(1)
		}
		go sidecar(*configManager, filepath.Base(flag.Arg(0)), *backoff)
	}
	if err := run(k, *kubeconfig, *prefix, *stdin, *quiet, flag.Args()); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			log.Printf("%s exited: %v", flag.Arg(0), err)
			os.Exit(max(exit.ExitCode(), 1))
		}
		log.Fatal(err)
	}
}

func run(k *kubelet, kubeconfig, prefix string, stdin bool, quiet time.Duration, command []string) error {
	if !k.once {
		config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		if k.client, err = kubernetes.NewForConfig(config); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(k.dir, 0o750); err != nil {
		return err
	}
	socket := filepath.Join(k.dir, filepath.Base(pluginapi.KubeletSocket))
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(server, k)
	go func() { _ = server.Serve(listener) }()
	defer server.Stop()
	if !k.once {
		if err := k.adopt(prefix); err != nil {
			return fmt.Errorf("cannot read node %s: %w", k.node, err)
		}
		log.Printf("serving %s for node %s; starting %s", socket, k.node, strings.Join(command, " "))
	}

	child := exec.Command(command[0], command[1:]...)
	child.Args[0] = filepath.Base(command[0])
	// the plugin ends with this program, whatever ends it
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	output, err := child.StderrPipe()
	if err != nil {
		return err
	}
	child.Stdout = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	started := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		scanner := bufio.NewScanner(output)
		scanner.Buffer(make([]byte, 64*1024), 1024*1024)
		marked := false
		for scanner.Scan() {
			line := scanner.Text()
			fmt.Fprintln(os.Stderr, line)
			for _, marker := range startedMarkers {
				if !marked && strings.Contains(line, marker) {
					marked = true
					close(started)
				}
			}
		}
	}()
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	ended := make(chan struct{})
	if stdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(ended)
		}()
	}
	done := make(chan error, 1)
	go func() {
		<-copied
		done <- child.Wait()
	}()
	var settled <-chan time.Time
	for {
		select {
		case sig := <-signals:
			log.Printf("passing %v on to %s", sig, command[0])
			_ = child.Process.Signal(sig)
		case <-ended:
			log.Printf("standard input ended: stopping %s", command[0])
			_ = child.Process.Signal(syscall.SIGTERM)
			ended = nil
		case <-started:
			started = nil
			settled = time.After(quiet)
		case <-k.events:
			if started == nil {
				settled = time.After(quiet)
			}
		case <-settled:
			if k.once {
				k.mu.Lock()
				resources := map[string]map[string]int{}
				for name, counts := range k.written {
					resources[name] = map[string]int{"devices": counts[0], "healthy": counts[1]}
				}
				k.mu.Unlock()
				data, err := json.Marshal(map[string]interface{}{"resources": resources})
				if err != nil {
					return err
				}
				fmt.Println(string(data))
				_ = child.Process.Signal(syscall.SIGTERM)
				<-done
				return nil
			}
		case err := <-done:
			if err == nil && k.once {
				return fmt.Errorf("%s exited before it had started its plugins", command[0])
			}
			return err
		}
	}
}

// configManagerCommand is NVIDIA's config-manager with the environment of one of the operator's two containers.
func configManagerCommand(path string, env ...string) *exec.Cmd {
	cmd := exec.Command(path)
	cmd.Args[0] = filepath.Base(path)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd
}

// initContainer runs config-manager once, as the operator's config-manager-init container: it points the config
// file at the node's config (label, else DEFAULT_CONFIG, else FALLBACK_STRATEGIES) before the plugin starts.
func initContainer(path string) error {
	log.Printf("running %s once (the config-manager-init container)", path)
	return configManagerCommand(path, "ONESHOT=true", "SEND_SIGNAL=false", "SIGNAL=", "PROCESS_TO_SIGNAL=").Run()
}

// sidecar runs config-manager beside the plugin for as long as this program runs, as the operator's config-manager
// container: on a change of the node's label it repoints the config file and sends SIGHUP to the process named
// process. Each exit is followed by a wait that starts at backoff and doubles up to five minutes.
func sidecar(path, process string, backoff time.Duration) {
	wait := backoff
	for {
		start := time.Now()
		err := configManagerCommand(path, "ONESHOT=false", "SEND_SIGNAL=true", "SIGNAL=1", "PROCESS_TO_SIGNAL="+process).Run()
		if time.Since(start) > 10*time.Minute {
			wait = backoff // ran long enough: the back-off starts again, as the kubelet's does
		}
		log.Printf("config-manager (sidecar) exited (%v); started again in %s", err, wait)
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Minute)
	}
}
