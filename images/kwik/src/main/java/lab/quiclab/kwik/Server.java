package lab.quiclab.kwik;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import tech.kwik.core.QuicConnection;
import tech.kwik.core.log.Logger;
import tech.kwik.core.log.SysOutLogger;
import tech.kwik.core.server.ServerConnectionConfig;
import tech.kwik.core.server.ServerConnector;
import tech.kwik.flupke.server.Http3ApplicationProtocolFactory;
import tech.kwik.flupke.server.HttpRequestHandler;
import tech.kwik.flupke.server.HttpServerRequest;
import tech.kwik.flupke.server.HttpServerResponse;

/**
 * `quiclab-kwik server`: kwik's ServerConnector on ${PORT:-443}/udp with flupke's HTTP/3 layer registered for ALPN h3
 * (Http3ApplicationProtocolFactory around this file handler), serving /srv/www (the lab's objects under /obj/) with
 * the key and certificate the pki one-shot made in /pki/kwik/; /healthz 204. Paths map to files by
 * {@link Contract#route}. kwik's congestion control is NewReno, fixed: nothing to choose.
 */
public final class Server {

    static final Path CERT = Path.of("/pki/kwik/cert.pem");
    static final Path KEY = Path.of("/pki/kwik/key.pem");
    private static final int CHUNK = 16 << 10;

    private Server() {
    }

    /** Answers a request from the lab's objects: one DATA frame per 16 KiB read (under kwik's 50 KiB stream send
     * buffer, so kwik never splits a write), with content-length; after the header section, each write and the close,
     * {@link Requeue#check} queues the send request kwik 0.10.9 may have lost (without it a response can stop for
     * good: docs/implementations.md, "kwik"). Responses without a body (204, 404, 405, HEAD) are one frame and its
     * end: a lost request leaves nothing behind there (the sender's frame takes it all). */
    static final class Objects implements HttpRequestHandler {
        private final Path root;

        Objects(Path root) {
            this.root = root;
        }

        @Override
        public void handleRequest(HttpServerRequest request, HttpServerResponse response) throws IOException {
            response.addHeader("server", "quiclab-kwik");
            response.addHeader("cache-control", "no-store");
            Contract.Route route = Contract.route(request.method(), request.path());
            if (route instanceof Contract.FileRoute file) {
                Path path = root.resolve(file.rel());
                if (Files.isRegularFile(path)) {
                    serve(path, file.contentType(), request.method().equals("HEAD"), response);
                    return;
                }
                route = new Contract.NotFound();
            }
            int status = route instanceof Contract.Health ? 204 : route instanceof Contract.MethodNotAllowed ? 405 : 404;
            response.setStatus(status);
            if (status != 204) {
                response.addHeader("content-length", "0");
            }
            // flupke sends the header section and ends the stream when the handler returns
        }

        private static void serve(Path path, String contentType, boolean head, HttpServerResponse response)
                throws IOException {
            try (InputStream in = Files.newInputStream(path)) {
                long length = Files.size(path);
                response.setStatus(200);
                response.addHeader("content-type", contentType);
                response.addHeader("content-length", Long.toString(length));
                if (head) {
                    return;
                }
                byte[] buf = new byte[CHUNK];
                long left = length;
                Requeue requeue;
                try (OutputStream out = response.getOutputStream()) {  // the header section is written here
                    requeue = Requeue.of(out);
                    requeue.check();
                    while (left > 0) {
                        int n = in.read(buf, 0, (int) Math.min(buf.length, left));
                        if (n < 0) {
                            throw new IOException("the file ended early: " + path);
                        }
                        out.write(buf, 0, n);  // flupke's DataFrameWriter: one DATA frame per write
                        requeue.check();
                        left -= n;
                    }
                }  // the end of the stream (flupke's close after the handler does nothing more)
                int atEnd = requeue.check();
                if (requeue.requeued() > 0) {  // the evidence: how often kwik lost it in this response (lost after the
                    // end of the stream, nothing else would have queued it: the response would have stopped for good)
                    System.err.println("quiclab-kwik server: " + path.getFileName() + ": kwik's lost send request "
                            + "queued again " + requeue.requeued() + " time(s), " + atEnd
                            + " after the end of the stream");
                }
            }
        }
    }

    /** The server's key pair as a key store: the PEM certificate chain and its PKCS#8 EC or RSA key. */
    static KeyStore keyStore(Path cert, Path key, char[] password) throws IOException, GeneralSecurityException {
        List<? extends Certificate> chain;
        try (InputStream in = Files.newInputStream(cert)) {
            chain = List.copyOf(CertificateFactory.getInstance("X.509").generateCertificates(in));
        }
        if (chain.isEmpty()) {
            throw new GeneralSecurityException(cert + ": no certificate");
        }
        String pem = Files.readString(key, StandardCharsets.US_ASCII);
        int begin = pem.indexOf("-----BEGIN PRIVATE KEY-----");
        int end = pem.indexOf("-----END PRIVATE KEY-----");
        if (begin < 0 || end < begin) {
            throw new GeneralSecurityException(key + ": no PKCS#8 private key (BEGIN PRIVATE KEY)");
        }
        byte[] der = Base64.getMimeDecoder().decode(pem.substring(begin + 27, end));
        String algorithm = chain.get(0).getPublicKey().getAlgorithm();  // "EC" (the lab's P-256) or "RSA"
        PrivateKey privateKey = KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("server", privateKey, password, chain.toArray(new Certificate[0]));
        return store;
    }

    static int port(String text) throws Contract.Refused {
        if (text == null || text.isBlank()) {
            return 443;
        }
        try {
            int p = Integer.parseInt(text.trim());
            if (p >= 1 && p <= 65535) {
                return p;
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new Contract.Refused(Contract.USAGE, "quiclab-kwik server: bad PORT \"" + text + "\": allowed is 1-65535");
    }

    public static void main(String[] args) {
        int code = run(args);
        if (code != 0) {  // 0: stopped by a signal, the JVM is already shutting down
            System.exit(code);
        }
    }

    static int run(String[] args) {
        if (args.length != 0) {
            System.err.println("quiclab-kwik server: unexpected argument \"" + args[0] + "\": the server takes none "
                    + "(PORT in the environment; kwik's congestion control is NewReno, fixed)");
            return Contract.USAGE;
        }
        int port;
        try {
            port = port(System.getenv("PORT"));
        } catch (Contract.Refused e) {
            System.err.println(e.getMessage());
            return e.exitCode;
        }
        char[] password = "quiclab".toCharArray();  // the in-memory key store's, never written anywhere
        KeyStore keys;
        try {
            keys = keyStore(CERT, KEY, password);
        } catch (IOException | GeneralSecurityException e) {
            System.err.println("quiclab-kwik server: " + e.getMessage());
            return 1;
        }
        try {
            Requeue.resolve();
        } catch (ExceptionInInitializerError e) {
            System.err.println(e.getMessage());
            return 1;
        }
        ServerConnectionConfig config = ServerConnectionConfig.builder()
                .maxIdleTimeoutInSeconds(30)
                .maxUnidirectionalStreamBufferSize(1_000_000)
                .maxBidirectionalStreamBufferSize(Contract.WINDOW)
                .maxConnectionBufferSize(Contract.WINDOW * 3 / 2)
                .maxOpenPeerInitiatedUnidirectionalStreams(10)
                .maxOpenPeerInitiatedBidirectionalStreams(100)
                .build();
        Logger log = new SysOutLogger();  // kwik's errors (always on), to the container's log; warnings stay off
        log.logWarning(false);            // (they are per handshake: "limited by remaining anti-amplification limit")
        ServerConnector connector;
        try {
            connector = ServerConnector.builder()
                    .withPort(port)
                    .withKeyStore(keys, "server", password)
                    .withSupportedVersions(List.of(QuicConnection.QuicVersion.V1))
                    .withConfiguration(config)
                    .withLogger(log)
                    .build();
        } catch (IOException | GeneralSecurityException e) {
            System.err.println("quiclab-kwik server: port " + port + "/udp: " + e.getMessage());
            return 1;
        }
        connector.registerApplicationProtocol(Http3ApplicationProtocolFactory.HTTP3_PROTOCOL_ID,
                new Http3ApplicationProtocolFactory(new Objects(Contract.ROOT)));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {  // SIGTERM / SIGINT: close the connections
            connector.close();
            stopped.countDown();
        }));
        connector.start();
        System.err.println("quiclab-kwik server: " + Contract.version() + " on " + port
                + "/udp, congestion control newreno (kwik's only one)");
        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 0;
    }
}
