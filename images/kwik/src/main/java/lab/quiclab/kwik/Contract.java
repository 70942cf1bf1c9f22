package lab.quiclab.kwik;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.net.InetAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.KeyStoreException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Function;
import java.util.regex.Pattern;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * What quiclab's kwik server and client share, once (as images/rust/common does for the Rust stacks): the paths the
 * server answers ({@link #route}), the download client's endpoint contract ({@link #parse}: the environment the lab's
 * adapter lab.endpoints.envfetch sets), its one JSON line ({@link #line}), the lab CA as a trust manager, and the
 * library versions read from the jars on the class path ({@link #version}, also this class's {@code main}).
 *
 * <p>Everything here is pure (no sockets, no clock) except the file readers and {@link #rcvbufErrors}.
 */
public final class Contract {

    /** Where the lab's objects are mounted in a server container (the `objects` volume at /srv/www/obj). */
    public static final Path ROOT = Path.of("/srv/www");
    /** The lab CA every client verifies the server's certificate against. */
    public static final Path CA_FILE = Path.of("/certs/ca.pem");
    /** The stream flow-control window, as the lab's other QUIC endpoints (the libraries' defaults are too small). */
    public static final long WINDOW = 16L << 20;
    /** kwik's one congestion control (its SenderImpl constructs a NewRenoCongestionController, no knob). */
    public static final String CC = "newreno";
    /** Exit code for a protocol the client does not speak (the lab records the combination as unsupported). */
    public static final int UNSUPPORTED = 127;
    /** Exit code for bad input (one line on stderr naming it). */
    public static final int USAGE = 2;
    private static final double DEFAULT_TIMEOUT_S = 60.0;

    private Contract() {
    }

    // --- the served paths ------------------------------------------------------------------------------------

    /** What the server answers, before any file is opened. */
    public sealed interface Route permits Health, FileRoute, NotFound, MethodNotAllowed {
    }

    /** 204, no body. */
    public record Health() implements Route {
    }

    /** The file at ROOT/rel (rel starts with obj/) if it is a regular file, else 404. */
    public record FileRoute(Path rel, String contentType) implements Route {
    }

    /** 404. */
    public record NotFound() implements Route {
    }

    /** 405: only GET and HEAD are served. */
    public record MethodNotAllowed() implements Route {
    }

    /** The content type as nginx's types: html for the workloads' test pages, everything else octet-stream. */
    public static String contentType(String name) {
        return name.endsWith(".html") ? "text/html" : "application/octet-stream";
    }

    /**
     * Route a request (`:method` and `:path` as they came; a query is ignored): /healthz 204, the lab's objects under
     * /obj/ from /srv/www/obj; no listings, no index files, nothing outside /obj/, no percent-decoding.
     */
    public static Route route(String method, String path) {
        if (!method.equals("GET") && !method.equals("HEAD")) {
            return new MethodNotAllowed();
        }
        String p = path.split("[?#]", 2)[0];
        if (p.equals("/healthz")) {
            return new Health();
        }
        if (!p.startsWith("/obj/") || p.endsWith("/")) {
            return new NotFound();
        }
        Path rel = Path.of("obj");
        String last = "";
        for (String segment : p.substring("/obj/".length()).split("/")) {
            if (segment.isEmpty()) {
                continue;
            }
            if (segment.equals(".") || segment.equals("..") || segment.contains("\\") || segment.contains("\0")
                    || segment.contains("%")) {
                return new NotFound();
            }
            rel = rel.resolve(segment);
            last = segment;
        }
        return last.isEmpty() ? new NotFound() : new FileRoute(rel, contentType(last));
    }

    // --- the client's contract --------------------------------------------------------------------------------

    /** One object to fetch: its URL and the parts of it the connection and request need. */
    public record Target(String url, String host, int port, String path) {
    }

    /** A fetch as the environment asked for it. */
    public record FetchArgs(List<Target> targets, double timeoutS, Optional<InetAddress> hostAddr) {
    }

    /** Why a fetch did not start: the exit code and the one line to print. */
    public static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;
        public final int exitCode;

        Refused(int exitCode, String message) {
            super(message);
            this.exitCode = exitCode;
        }
    }

    /** One https URL into its parts. */
    public static Target target(String url) throws Refused {
        URI uri;
        try {
            uri = new URI(url);
        } catch (URISyntaxException e) {
            throw new Refused(USAGE, "kwik fetch: bad URL \"" + url + "\": not a URL");
        }
        if (!"https".equals(uri.getScheme())) {
            throw new Refused(USAGE, "kwik fetch: bad URL \"" + url + "\": allowed is https://HOST[:PORT]/PATH");
        }
        String host = uri.getHost();
        if (host == null || host.isEmpty()) {
            throw new Refused(USAGE, "kwik fetch: bad URL \"" + url + "\": no host");
        }
        host = host.replaceAll("^\\[|\\]$", "");
        String path = uri.getRawPath() == null || uri.getRawPath().isEmpty() ? "/" : uri.getRawPath();
        if (uri.getRawQuery() != null) {
            path += "?" + uri.getRawQuery();
        }
        return new Target(url, host, uri.getPort() < 0 ? 443 : uri.getPort(), path);
    }

    private static final Pattern IPV4 = Pattern.compile("(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}");
    private static final Pattern IPV6 = Pattern.compile("[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*");

    /** An IP address literal (never a name: no DNS), or Refused naming it. */
    static InetAddress ipLiteral(String text) throws Refused {
        String a = text.trim();
        if (IPV4.matcher(a).matches() || IPV6.matcher(a).matches()) {
            try {
                return InetAddress.getByName(a);  // a literal: no lookup
            } catch (UnknownHostException e) {
                // falls through to the refusal
            }
        }
        throw new Refused(USAGE, "kwik fetch: bad HOST_ADDR \"" + text + "\": allowed is an IP address");
    }

    /**
     * The contract from an environment lookup: PROTOCOL (only h3: anything else is 127, unsupported), URL (a
     * space-separated list: N objects in turn on one connection), TIMEOUT (seconds; 60 when unset), HOST_ADDR (where
     * the packets go, as curl's --resolve; the certificate is verified for the URL's host name) and CC (kwik has one
     * congestion control: empty, native, default, newreno and reno name it, anything else is refused).
     */
    public static FetchArgs parse(Function<String, String> env) throws Refused {
        String protocol = Optional.ofNullable(env.apply("PROTOCOL")).orElse("");
        if (!protocol.isEmpty() && !protocol.equals("h3")) {
            throw new Refused(UNSUPPORTED, "kwik's client speaks HTTP/3 only, not " + protocol);
        }
        List<Target> targets = new ArrayList<>();
        for (String url : Optional.ofNullable(env.apply("URL")).orElse("").trim().split("\\s+")) {
            if (!url.isEmpty()) {
                targets.add(target(url));
            }
        }
        if (targets.isEmpty()) {
            throw new Refused(USAGE, "kwik fetch: URL is not set");
        }
        Target first = targets.get(0);
        for (Target t : targets) {
            if (!t.host().equals(first.host()) || t.port() != first.port()) {
                throw new Refused(USAGE, "kwik fetch: URL \"" + t.url() + "\" is on another server than \""
                        + first.url() + "\": the objects are fetched on one connection");
            }
        }
        double timeout = DEFAULT_TIMEOUT_S;
        String t = env.apply("TIMEOUT");
        if (t != null && !t.isBlank()) {
            try {
                timeout = Double.parseDouble(t.trim());
            } catch (NumberFormatException e) {
                timeout = Double.NaN;
            }
            if (!(timeout > 0) || Double.isInfinite(timeout)) {
                throw new Refused(USAGE, "kwik fetch: bad TIMEOUT \"" + t + "\": allowed is a number of seconds > 0");
            }
        }
        String a = env.apply("HOST_ADDR");
        Optional<InetAddress> hostAddr = a == null || a.isBlank() ? Optional.empty() : Optional.of(ipLiteral(a));
        String cc = Optional.ofNullable(env.apply("CC")).orElse("").trim().toLowerCase(Locale.ROOT);
        if (!List.of("", "native", "default", "newreno", "reno").contains(cc)) {
            throw new Refused(USAGE, "kwik fetch: congestion control must be newreno (kwik's only one), got \"" + cc + "\"");
        }
        return new FetchArgs(List.copyOf(targets), timeout, hostAddr);
    }

    // --- the report -------------------------------------------------------------------------------------------

    /** How a fetch ended, with curl's exit codes (28 timed out, 60 certificate, 7 could not connect, 1 other). */
    public enum Ending {
        OK(0), TIMED_OUT(28), CERTIFICATE(60), CONNECT(7), FAILED(1);

        public final int exitCode;

        Ending(int exitCode) {
            this.exitCode = exitCode;
        }
    }

    /** An ending and its message ("" for OK). */
    public record Outcome(Ending ending, String message) {
        public static final Outcome OK = new Outcome(Ending.OK, "");
    }

    /** One object: its status, size and SHA-256; `t` the wall-clock time (Unix s) of its last byte, `total` the
     * seconds from its request to its last byte. */
    public record Transfer(String url, int status, long size, String sha256, double t, double total) {
    }

    /** What the client measured, in seconds from the start of its connection attempt (null: never reached). */
    public record Timings(Double handshake, Double firstHeader, double total) {
    }

    /** A body's size and SHA-256 as it streams in. */
    public static final class BodyDigest {
        private final MessageDigest sha = sha256();
        private long size;

        public void update(byte[] b, int off, int len) {
            sha.update(b, off, len);
            size += len;
        }

        public void update(java.nio.ByteBuffer chunk) {
            size += chunk.remaining();
            sha.update(chunk);
        }

        public long size() {
            return size;
        }

        public String hex() {
            return HexFormat.of().formatHex(sha.digest());
        }
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java runtime has SHA-256", e);
        }
    }

    /** The objects' digest: the one object's, or the SHA-256 of the N hex digests concatenated; "" for none. */
    public static String combinedSha256(List<Transfer> transfers) {
        if (transfers.isEmpty()) {
            return "";
        }
        if (transfers.size() == 1) {
            return transfers.get(0).sha256();
        }
        MessageDigest sha = sha256();
        for (Transfer t : transfers) {
            sha.update(t.sha256().getBytes(StandardCharsets.US_ASCII));
        }
        return HexFormat.of().formatHex(sha.digest());
    }

    /**
     * The one JSON line a fetch prints (the fields the lab's parse_fetch_json reads, as the other clients print
     * them): `exit`, `sha256`, `curl` (curl's %{json} names: http_version "3" only when every object arrived with
     * 200, size_download, time_appconnect = handshake, time_starttransfer = first response header section,
     * time_total, errormsg, and `cc`), `transfers` (one per object) and `udp_rcvbuf_errors`.
     */
    public static String line(int wanted, List<Transfer> transfers, Timings timings, Outcome outcome, Long rcvbuf) {
        if (outcome.ending() == Ending.OK && transfers.size() != wanted) {
            outcome = new Outcome(Ending.FAILED, transfers.size() + " of " + wanted + " objects fetched");
        }
        if (outcome.ending() == Ending.OK) {
            for (Transfer t : transfers) {
                if (t.status() != 200) {
                    outcome = new Outcome(Ending.FAILED, "HTTP " + t.status() + " for " + t.url());
                    break;
                }
            }
        }
        boolean ok = outcome.ending() == Ending.OK;
        StringBuilder j = new StringBuilder(256);
        j.append("{\"exit\":").append(outcome.ending().exitCode)
                .append(",\"sha256\":").append(quote(combinedSha256(transfers)))
                .append(",\"curl\":{\"http_version\":").append(quote(ok ? "3" : ""))
                .append(",\"response_code\":").append(transfers.isEmpty() ? 0 : transfers.get(transfers.size() - 1).status())
                .append(",\"size_download\":").append(transfers.stream().mapToLong(Transfer::size).sum())
                .append(",\"time_total\":").append(micro(timings.total()))
                .append(",\"time_appconnect\":").append(micro(timings.handshake() == null ? 0 : timings.handshake()))
                .append(",\"time_starttransfer\":").append(micro(timings.firstHeader() == null ? 0 : timings.firstHeader()))
                .append(",\"errormsg\":").append(quote(outcome.message()))
                .append(",\"cc\":").append(quote(CC))
                .append("},\"transfers\":[");
        for (int i = 0; i < transfers.size(); i++) {
            Transfer t = transfers.get(i);
            j.append(i == 0 ? "" : ",").append("{\"url\":").append(quote(t.url()))
                    .append(",\"status\":").append(t.status()).append(",\"size\":").append(t.size())
                    .append(",\"sha256\":").append(quote(t.sha256())).append(",\"t\":").append(micro(t.t()))
                    .append(",\"total\":").append(micro(t.total())).append('}');
        }
        return j.append("],\"udp_rcvbuf_errors\":").append(rcvbuf == null ? "null" : rcvbuf.toString()).append('}')
                .toString();
    }

    /** Seconds to six decimals, as a plain JSON number. */
    static String micro(double s) {
        return BigDecimal.valueOf(s).setScale(6, RoundingMode.HALF_UP).stripTrailingZeros().toPlainString();
    }

    /** A JSON string. */
    static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    /** This network namespace's UDP receive-buffer drops so far (the image's `quiclab-rcvbuf-errors`), or null. */
    public static Long rcvbufErrors() {
        try {
            Process p = new ProcessBuilder("quiclab-rcvbuf-errors").redirectErrorStream(false).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII).trim();
            return p.waitFor() == 0 ? Long.valueOf(out) : null;
        } catch (IOException | NumberFormatException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    // --- trust and versions -----------------------------------------------------------------------------------

    /** A trust manager holding every CA certificate in `pem` (the lab CA bundle): PKIX validation, nothing skipped. */
    public static X509TrustManager trust(byte[] pem) throws CertificateException {
        try {
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int n = 0;
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(pem))) {
                store.setCertificateEntry("ca" + n++, c);
            }
            if (n == 0) {
                throw new CertificateException("no certificate in the CA file");
            }
            TrustManagerFactory f = TrustManagerFactory.getInstance("PKIX");
            f.init(store);
            return (X509TrustManager) f.getTrustManagers()[0];
        } catch (KeyStoreException | NoSuchAlgorithmException | IOException e) {
            throw new CertificateException(e);
        }
    }

    /** The lab CA ({@link #CA_FILE}) as a trust manager. */
    public static X509TrustManager labTrust() throws IOException, CertificateException {
        return trust(Files.readAllBytes(CA_FILE));
    }

    /** The first line of a resource a library's jar carries (its build wrote its version there), or "unknown". */
    static String resource(String name) {
        try (InputStream in = Contract.class.getClassLoader().getResourceAsStream(name)) {
            if (in == null) {
                return "unknown";
            }
            String text = new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
            return text.isEmpty() ? "unknown" : text.lines().findFirst().orElse("unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }

    /**
     * The library versions this process runs with, read from the jars on its class path: each of kwik, flupke and
     * agent15 carries the version its build wrote (tech/kwik/core/version.properties; flupke 0.9.4's is under
     * impl/, where its own FlupkeVersion does not look and says "dev"), and the Java runtime's.
     */
    public static String version() {
        return "kwik " + resource("tech/kwik/core/version.properties")
                + " (flupke " + resource("tech/kwik/flupke/impl/version.properties")
                + ", agent15 " + resource("tech/kwik/agent15/version.properties")
                + "; Java " + Runtime.version() + ")";
    }

    /** `quiclab-kwik version`. */
    public static void main(String[] args) {
        if (args.length != 0) {
            System.err.println("quiclab-kwik version: unexpected argument \"" + args[0] + "\"");
            System.exit(USAGE);
        }
        System.out.println(version());
    }
}
