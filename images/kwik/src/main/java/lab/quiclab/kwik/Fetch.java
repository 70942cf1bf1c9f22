package lab.quiclab.kwik;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.UnknownHostException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.security.cert.CertificateException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.net.ssl.X509TrustManager;
import tech.kwik.core.QuicClientConnection;
import tech.kwik.core.concurrent.DaemonThreadFactory;
import tech.kwik.core.log.NullLogger;
import tech.kwik.flupke.impl.Http3ClientConnectionImpl;

/**
 * `quiclab-kwik fetch`: the download client (Contract#parse is its contract). One kwik client connection to the server
 * (HOST_ADDR, as curl's --resolve, through kwik's builder `proxy`; else the URL's host resolved), ALPN h3 only, the
 * certificate verified by kwik's TLS (agent15) against the lab CA (a PKIX trust manager of /certs/ca.pem) and for
 * the URL's host name (agent15's hostname check of the SNI it sends); flupke's HTTP/3 connection on it, the objects
 * requested in turn, each body hashed as it streams in; one JSON line (Contract#line).
 *
 * <p>Timings from the start of the connection attempt: the handshake when kwik's connect() returned (the handshake
 * is complete), the first response's header section (flupke hands it to the body handler), the last body byte of
 * the last object. The JVM's start-up is before the start and is not in them.
 */
public final class Fetch {

    private Fetch() {
    }

    /** Seconds since `start` (System.nanoTime()). */
    static double since(long start) {
        return (System.nanoTime() - start) / 1e9;
    }

    /** A body handler that notes when the header section arrived and hashes the body as flupke delivers it. */
    static final class Digesting implements HttpResponse.BodyHandler<Contract.BodyDigest> {
        private final long start;
        volatile Double firstHeader;

        Digesting(long start) {
            this.start = start;
        }

        @Override
        public HttpResponse.BodySubscriber<Contract.BodyDigest> apply(HttpResponse.ResponseInfo info) {
            double t = since(start);
            if (firstHeader == null) {
                firstHeader = t;
            }
            Contract.BodyDigest digest = new Contract.BodyDigest();
            CompletableFuture<Contract.BodyDigest> done = new CompletableFuture<>();
            return new HttpResponse.BodySubscriber<>() {
                @Override
                public CompletionStage<Contract.BodyDigest> getBody() {
                    return done;
                }

                @Override
                public void onSubscribe(Flow.Subscription subscription) {
                    subscription.request(Long.MAX_VALUE);
                }

                @Override
                public void onNext(List<ByteBuffer> chunks) {
                    chunks.forEach(digest::update);
                }

                @Override
                public void onError(Throwable error) {
                    done.completeExceptionally(error);
                }

                @Override
                public void onComplete() {
                    done.complete(digest);
                }
            };
        }
    }

    /** A handshake failure: the certificate (curl's 60), a timeout (28) or anything else (7, could not connect). */
    static Contract.Outcome handshakeFailed(Exception e) {
        String m = String.valueOf(e.getMessage());
        String lower = m.toLowerCase(Locale.ROOT);
        if (lower.contains("certificate") || lower.contains("servername does not match")) {
            return new Contract.Outcome(Contract.Ending.CERTIFICATE, m);
        }
        if (lower.contains("timed out")) {
            return new Contract.Outcome(Contract.Ending.TIMED_OUT, m);
        }
        return new Contract.Outcome(Contract.Ending.CONNECT, m);
    }

    /** One connection, the objects in turn; fills `transfers` as they complete. */
    static final class Session {
        private final Contract.FetchArgs args;
        private final X509TrustManager trust;
        private final long start;
        private final ExecutorService h3Threads = Executors.newCachedThreadPool(new DaemonThreadFactory("h3"));
        final List<Contract.Transfer> transfers = new ArrayList<>();
        volatile Double handshake;
        volatile Digesting firstHandler;
        volatile double total;
        private volatile QuicClientConnection connection;

        Session(Contract.FetchArgs args, X509TrustManager trust, long start) {
            this.args = args;
            this.trust = trust;
            this.start = start;
        }

        Contract.Outcome run() {
            Contract.Target first = args.targets().get(0);
            try {
                QuicClientConnection.Builder b = QuicClientConnection.newBuilder()
                        .host(first.host())
                        .port(first.port())
                        .applicationProtocol("h3")
                        .connectTimeout(Duration.ofMillis(Math.max(1, (long) (args.timeoutS() * 1000))))
                        .customTrustManager(trust)
                        .defaultStreamReceiveBufferSize(Contract.WINDOW)  // kwik sets the connection's to 10 times it
                        // RFC 9114 6.2: the peer may open its control and QPACK streams; no push, no server bidi streams
                        .maxOpenPeerInitiatedUnidirectionalStreams(3)
                        .maxOpenPeerInitiatedBidirectionalStreams(0)
                        .logger(new NullLogger());
                args.hostAddr().ifPresent(a -> b.proxy(a.getHostAddress()));
                String keyLog = System.getenv("SSLKEYLOGFILE");
                if (keyLog != null && !keyLog.isBlank()) {
                    b.secrets(Path.of(keyLog));  // kwik writes NSS key log lines (CLIENT_TRAFFIC_SECRET_0 ...) there
                }
                connection = b.build();
            } catch (UnknownHostException e) {
                return new Contract.Outcome(Contract.Ending.CONNECT, first.host() + ": " + e.getMessage());
            } catch (IOException | RuntimeException e) {
                return new Contract.Outcome(Contract.Ending.CONNECT, String.valueOf(e.getMessage()));
            }
            try {
                connection.connect();
            } catch (ConnectException e) {
                return handshakeFailed(e);
            } catch (IOException | RuntimeException e) {
                return new Contract.Outcome(Contract.Ending.CONNECT, String.valueOf(e.getMessage()));
            }
            handshake = since(start);
            Http3ClientConnectionImpl h3 = new Http3ClientConnectionImpl(connection, h3Threads);
            try {
                h3.connect();  // the QUIC connection is up: this opens the control stream
                for (Contract.Target target : args.targets()) {
                    long t0 = System.nanoTime();
                    Digesting handler = new Digesting(start);
                    if (firstHandler == null) {
                        firstHandler = handler;
                    }
                    HttpRequest request = HttpRequest.newBuilder(URI.create(target.url()))
                            .header("user-agent", "quiclab-kwik").GET().build();
                    HttpResponse<Contract.BodyDigest> response = h3.send(request, handler);
                    Contract.BodyDigest body = response.body();
                    long size = body == null ? 0 : body.size();
                    String sha = body == null ? new Contract.BodyDigest().hex() : body.hex();
                    synchronized (transfers) {
                        transfers.add(new Contract.Transfer(target.url(), response.statusCode(), size, sha,
                                System.currentTimeMillis() / 1e3, since(t0)));
                    }
                    if (response.statusCode() != 200) {
                        return new Contract.Outcome(Contract.Ending.FAILED,
                                "HTTP " + response.statusCode() + " for " + target.url());
                    }
                }
                total = since(start);
                return Contract.Outcome.OK;
            } catch (IOException | RuntimeException e) {
                return new Contract.Outcome(Contract.Ending.FAILED, e.getClass().getSimpleName() + ": " + e.getMessage());
            } finally {
                close();
            }
        }

        void close() {
            QuicClientConnection c = connection;
            if (c != null) {
                c.close();  // CONNECTION_CLOSE to the server
            }
        }
    }

    public static void main(String[] args) {
        if (args.length != 0) {
            System.err.println("quiclab-kwik fetch: unexpected argument \"" + args[0] + "\": the contract is in the "
                    + "environment (PROTOCOL, URL, TIMEOUT, HOST_ADDR)");
            System.exit(Contract.USAGE);
        }
        System.exit(run());
    }

    static int run() {
        Contract.FetchArgs args;
        X509TrustManager trust;
        try {
            args = Contract.parse(System::getenv);
        } catch (Contract.Refused e) {
            System.err.println(e.getMessage());
            return e.exitCode;
        }
        try {
            trust = Contract.labTrust();
        } catch (IOException | CertificateException e) {
            System.err.println("kwik fetch: the lab CA " + Contract.CA_FILE + ": " + e.getMessage());
            return Contract.USAGE;
        }
        Long drops0 = Contract.rcvbufErrors();
        long start = System.nanoTime();
        Session session = new Session(args, trust, start);
        ExecutorService runner = Executors.newSingleThreadExecutor(new DaemonThreadFactory("fetch"));
        Future<Contract.Outcome> running = runner.submit(session::run);
        Contract.Outcome outcome;
        try {
            outcome = running.get((long) (args.timeoutS() * 1e9), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            outcome = new Contract.Outcome(Contract.Ending.TIMED_OUT, "timed out after " + args.timeoutS() + " s");
            session.close();
        } catch (ExecutionException e) {
            outcome = new Contract.Outcome(Contract.Ending.FAILED, String.valueOf(e.getCause()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            outcome = new Contract.Outcome(Contract.Ending.FAILED, "interrupted");
        }
        double total = outcome.ending() == Contract.Ending.OK && session.total > 0 ? session.total : since(start);
        Digesting first = session.firstHandler;
        Contract.Timings timings = new Contract.Timings(session.handshake, first == null ? null : first.firstHeader,
                total);
        Long drops1 = Contract.rcvbufErrors();
        Long drops = drops0 != null && drops1 != null ? drops1 - drops0 : null;
        List<Contract.Transfer> transfers;
        synchronized (session.transfers) {
            transfers = List.copyOf(session.transfers);
        }
        System.out.println(Contract.line(args.targets().size(), transfers, timings, outcome, drops));
        System.out.flush();
        return 0;
    }
}
