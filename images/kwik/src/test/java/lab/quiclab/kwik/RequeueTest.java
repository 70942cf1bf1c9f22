package lab.quiclab.kwik;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tech.kwik.core.QuicConnection;
import tech.kwik.core.log.NullLogger;
import tech.kwik.core.server.ServerConnectionConfig;
import tech.kwik.core.server.ServerConnector;
import tech.kwik.flupke.Http3Client;
import tech.kwik.flupke.server.Http3ApplicationProtocolFactory;
import tech.kwik.flupke.server.HttpServerResponse;

/**
 * Requeue against the real kwik 0.10.9 and flupke 0.9.4, on loopback: a response is put into the state kwik's lost
 * send request leaves (its body and end buffered, no request counted, none queued), made directly rather than by
 * waiting for the race. Left so, the body does not arrive (nothing in kwik queues a request again; the test waits 3 s);
 * after {@link Requeue#check} it arrives whole.
 */
class RequeueTest {

    private static final byte[] BODY = new byte[40_000];  // under kwik's 50 KiB stream buffer: write and close return

    static {
        new Random(33).nextBytes(BODY);
    }

    @TempDir
    Path dir;
    private ServerConnector connector;
    private int port;
    private volatile boolean repair;
    private volatile String handlerState = "not run";
    private final CountDownLatch headersReceived = new CountDownLatch(1);

    @BeforeEach
    void start() throws Exception {
        Path p12 = dir.resolve("server.p12");
        Process keytool = new ProcessBuilder("keytool", "-genkeypair", "-keyalg", "EC", "-groupname", "secp256r1",
                "-alias", "server", "-dname", "CN=localhost", "-validity", "2", "-storetype", "PKCS12",
                "-keystore", p12.toString(), "-storepass", "quiclab", "-keypass", "quiclab")
                .redirectErrorStream(true).start();
        assertEquals(0, keytool.waitFor(), new String(keytool.getInputStream().readAllBytes()));
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = java.nio.file.Files.newInputStream(p12)) {
            keys.load(in, "quiclab".toCharArray());
        }
        DatagramSocket socket = new DatagramSocket(0, InetAddress.getLoopbackAddress());
        port = socket.getLocalPort();
        connector = ServerConnector.builder()
                .withSocket(socket)
                .withKeyStore(keys, "server", "quiclab".toCharArray())
                .withSupportedVersions(List.of(QuicConnection.QuicVersion.V1))
                .withConfiguration(ServerConnectionConfig.builder().maxIdleTimeoutInSeconds(10)
                        .maxOpenPeerInitiatedUnidirectionalStreams(10).maxOpenPeerInitiatedBidirectionalStreams(10)
                        .build())
                .withLogger(new NullLogger())
                .build();
        connector.registerApplicationProtocol(Http3ApplicationProtocolFactory.HTTP3_PROTOCOL_ID,
                new Http3ApplicationProtocolFactory((request, response) -> lose(response)));
        connector.start();
    }

    @AfterEach
    void stop() {
        connector.close();
    }

    /** The handler: the header section sent (the client has it), then the body and the end buffered with the
     * request kwik lost. */
    private void lose(HttpServerResponse response) {
        try {
            response.setStatus(200);
            response.addHeader("content-length", Integer.toString(BODY.length));
            OutputStream out = response.getOutputStream();
            Requeue requeue = Requeue.of(out);
            if (!headersReceived.await(20, TimeUnit.SECONDS)) {  // kwik's sender is done with the header section
                handlerState = "the client did not receive the header section";
                return;
            }
            if (requeue.queuedCount().get() != 0 || requeue.buffered()) {
                handlerState = "not idle after the header section";
                return;
            }
            requeue.queuedCount().incrementAndGet();  // counted as queued: kwik's write and close queue no request
            out.write(BODY);
            out.close();
            requeue.queuedCount().decrementAndGet();  // the lost state: body and end buffered, none counted or queued
            boolean lost = requeue.lost();
            if (repair) {
                requeue.check();
            }
            handlerState = "lost " + lost + ", requeued " + requeue.requeued();
        } catch (Exception e) {
            handlerState = e.toString();
        }
    }

    /** The response's body, read once the client has its header section (the handler then goes on). */
    private CompletableFuture<byte[]> get() throws Exception {
        HttpClient client = Http3Client.newBuilder().disableCertificateCheck().connectTimeout(Duration.ofSeconds(10))
                .build();
        HttpRequest request = HttpRequest.newBuilder(URI.create("https://127.0.0.1:" + port + "/x")).GET().build();
        HttpResponse<InputStream> response = client.sendAsync(request, HttpResponse.BodyHandlers.ofInputStream())
                .get(20, TimeUnit.SECONDS);
        assertEquals(200, response.statusCode());
        headersReceived.countDown();
        return CompletableFuture.supplyAsync(() -> {
            try (InputStream in = response.body()) {
                return in.readAllBytes();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }

    @Test
    void aResponseWhoseSendRequestKwikLostNeverArrivesByItself() throws Exception {
        repair = false;
        CompletableFuture<byte[]> body = get();
        assertThrows(TimeoutException.class, () -> body.get(3, TimeUnit.SECONDS), () -> handlerState);
        assertEquals("lost true, requeued 0", handlerState);
    }

    @Test
    void theCheckQueuesItAgainAndTheResponseArrivesWhole() throws Exception {
        repair = true;
        assertArrayEquals(BODY, get().get(20, TimeUnit.SECONDS), () -> handlerState);
        assertEquals("lost true, requeued 1", handlerState);
    }

    @Test
    void theLookUpsResolveInTheseJars() {
        Requeue.resolve();
        assertTrue(Requeue.MAX_PER_CHECK >= 1);
    }
}
