// quiclab-quicgo: quic-go's own HTTP/3 server and client (github.com/quic-go/quic-go/http3), nothing more.
//
//	quiclab-quicgo server    serves /srv/www/obj (the lab's objects under /obj/) over HTTP/3 on ${PORT:-443}/udp with
//	                         /pki/quic-go/{cert,key}.pem; /healthz answers 204. QLOGDIR: one qlog per connection
//	                         (quic-go's qlog.DefaultConnectionTracer); SSLKEYLOGFILE: TLS secrets.
//	quiclab-quicgo fetch     the endpoint contract (docs/implementations.md): PROTOCOL, URL (a space-separated
//	                         list: N objects in turn on one connection), TIMEOUT, HOST_ADDR, QLOGDIR, SSLKEYLOGFILE
//	                         in the environment; one JSON line; exit 127 for anything but h3.
//	quiclab-quicgo version   the quic-go module version and Go toolchain this binary was built with.
//
// quic-go's congestion control is fixed: its sent-packet handler makes a cubic sender with reno=true
// (internal/ackhandler/sent_packet_handler.go, "use Reno"); quic.Config has no setting for it.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
)

const (
	root        = "/srv/www"
	caFile      = "/certs/ca.pem"
	unsupported = 127
	timeoutExit = 28 // curl's "operation timed out": the lab's timeout outcome
	window      = 16 << 20
)

func quicConfig() *quic.Config {
	return &quic.Config{
		MaxStreamReceiveWindow:     window,
		MaxConnectionReceiveWindow: window * 3 / 2,
		Tracer:                     qlog.DefaultConnectionTracer, // nil trace unless QLOGDIR is set
	}
}

func keyLog() io.Writer {
	path := os.Getenv("SSLKEYLOGFILE")
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "quiclab-quicgo: key log %s: %v\n", path, err)
		return nil
	}
	return f
}

func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "quic-go (unknown version)"
	}
	for _, m := range info.Deps {
		if m.Path == "github.com/quic-go/quic-go" {
			return fmt.Sprintf("quic-go %s (%s)", m.Version, info.GoVersion)
		}
	}
	return "quic-go (not in the build info)"
}

// --- server ----------------------------------------------------------------------------------------------------

func server() error {
	port := os.Getenv("PORT")
	if port == "" {
		port = "443"
	}
	cert, err := tls.LoadX509KeyPair("/pki/quic-go/cert.pem", "/pki/quic-go/key.pem")
	if err != nil {
		return err
	}
	files := http.Dir(root)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// files as they are, by their path: no directory listing and no index.html redirect (http.FileServer's), the
	// content type as nginx's types: html for the workloads' test pages (index.html), everything else octet-stream
	mux.Handle("/obj/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := files.Open(path.Clean(r.URL.Path))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil || info.IsDir() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if strings.HasSuffix(info.Name(), ".html") {
			w.Header().Set("Content-Type", "text/html")
		} else {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		http.ServeContent(w, r, info.Name(), info.ModTime(), f)
	}))
	srv := &http3.Server{
		Addr:       ":" + port,
		Handler:    mux,
		TLSConfig:  http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, KeyLogWriter: keyLog()}),
		QUICConfig: quicConfig(),
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-stop; _ = srv.Close() }()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, quic.ErrServerClosed) {
		return err
	}
	return nil
}

// --- client ----------------------------------------------------------------------------------------------------

type curlish struct {
	HTTPVersion       string  `json:"http_version"`
	ResponseCode      int     `json:"response_code"`
	SizeDownload      int64   `json:"size_download"`
	TimeTotal         float64 `json:"time_total"`
	TimeAppconnect    float64 `json:"time_appconnect"`
	TimeStarttransfer float64 `json:"time_starttransfer"`
	Errormsg          string  `json:"errormsg"`
}

type transfer struct {
	URL    string  `json:"url"`
	Status int     `json:"status"`
	Size   int64   `json:"size"`
	SHA256 string  `json:"sha256"`
	T      float64 `json:"t"`
	Total  float64 `json:"total"`
}

type line struct {
	Exit      int        `json:"exit"`
	SHA256    string     `json:"sha256"`
	Curl      curlish    `json:"curl"`
	Transfers []transfer `json:"transfers"`
	Drops     *int64     `json:"udp_rcvbuf_errors"`
}

func rcvbufErrors() *int64 {
	out, err := exec.Command("quiclab-rcvbuf-errors").Output()
	if err != nil {
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

func fetch() int {
	if p := os.Getenv("PROTOCOL"); p != "" && p != "h3" {
		fmt.Fprintf(os.Stderr, "quic-go's client speaks HTTP/3 only, not %s\n", p)
		return unsupported
	}
	urls := strings.Fields(os.Getenv("URL"))
	if len(urls) == 0 {
		fmt.Fprintln(os.Stderr, "quiclab-quicgo fetch: URL is not set")
		return 2
	}
	timeout := 60.0
	if t, err := strconv.ParseFloat(os.Getenv("TIMEOUT"), 64); err == nil && t > 0 {
		timeout = t
	}
	first, err := url.Parse(urls[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "quiclab-quicgo fetch: bad URL %q\n", urls[0])
		return 2
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "quiclab-quicgo fetch: %v\n", err)
		return 2
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	// the lab CA verifies the server's certificate for its host name; HOST_ADDR (the registry's address) is
	// where the packets go, as curl's --resolve
	address := os.Getenv("HOST_ADDR")
	out := line{}
	drops0 := rcvbufErrors()
	start := time.Now()
	var handshake time.Time
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: first.Hostname(), KeyLogWriter: keyLog()},
		QUICConfig:      quicConfig(),
		Dial: func(ctx context.Context, addr string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			if address != "" {
				_, port, _ := net.SplitHostPort(addr)
				addr = net.JoinHostPort(address, port)
			}
			conn, err := quic.DialAddr(ctx, addr, tlsCfg, cfg) // returns once the handshake is complete
			handshake = time.Now()
			return conn, err
		},
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout*float64(time.Second)))
	defer cancel()
	client := &http.Client{Transport: tr}
	var total int64
	var ttfb time.Time
	err = func() error {
		for _, u := range urls {
			t0 := time.Now()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			if ttfb.IsZero() {
				ttfb = time.Now() // the response's header section arrived
			}
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			total += n
			out.Curl.ResponseCode = resp.StatusCode
			out.Transfers = append(out.Transfers, transfer{URL: u, Status: resp.StatusCode, Size: n,
				SHA256: hex.EncodeToString(h.Sum(nil)), T: float64(time.Now().UnixNano()) / 1e9,
				Total: time.Since(t0).Seconds()})
			if err != nil {
				return err
			}
			if resp.ProtoMajor != 3 {
				return fmt.Errorf("the response came over %s, not HTTP/3", resp.Proto)
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("HTTP %d for %s", resp.StatusCode, u)
			}
		}
		return nil
	}()
	elapsed := time.Since(start).Seconds()
	out.Curl.TimeTotal = elapsed
	out.Curl.SizeDownload = total
	if !handshake.IsZero() {
		out.Curl.TimeAppconnect = handshake.Sub(start).Seconds()
	}
	if !ttfb.IsZero() {
		out.Curl.TimeStarttransfer = ttfb.Sub(start).Seconds()
	}
	switch {
	case err == nil:
		out.Curl.HTTPVersion = "3"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.Exit, out.Curl.Errormsg = timeoutExit, fmt.Sprintf("timed out after %g s: %v", timeout, err)
	default:
		var certErr *tls.CertificateVerificationError
		if errors.As(err, &certErr) {
			out.Exit = 60
		} else {
			out.Exit = 1
		}
		out.Curl.Errormsg = err.Error()
	}
	if len(out.Transfers) == 1 {
		out.SHA256 = out.Transfers[0].SHA256
	} else if len(out.Transfers) > 1 {
		h := sha256.New()
		for _, t := range out.Transfers {
			h.Write([]byte(t.SHA256))
		}
		out.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	if drops1 := rcvbufErrors(); drops0 != nil && drops1 != nil {
		d := *drops1 - *drops0
		out.Drops = &d
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return 0
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: quiclab-quicgo server|fetch|version")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "server":
		if err := server(); err != nil {
			fmt.Fprintf(os.Stderr, "quiclab-quicgo server: %v\n", err)
			os.Exit(1)
		}
	case "fetch":
		os.Exit(fetch())
	case "version":
		fmt.Println(version())
	default:
		fmt.Fprintf(os.Stderr, "quiclab-quicgo: unknown command %q: allowed are server, fetch, version\n", os.Args[1])
		os.Exit(2)
	}
}
