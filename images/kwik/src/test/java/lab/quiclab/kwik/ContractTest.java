package lab.quiclab.kwik;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The pure parts of the contract: the served paths, the client's environment, the JSON line. */
class ContractTest {

    private static Contract.FetchArgs parse(Map<String, String> env) throws Contract.Refused {
        return Contract.parse(env::get);
    }

    @Test
    void theLabsObjectsMapToTheirFiles() {
        assertEquals(new Contract.FileRoute(Path.of("obj/1000000"), "application/octet-stream"),
                Contract.route("GET", "/obj/1000000"));
        assertEquals(new Contract.FileRoute(Path.of("obj/page-4-1000/index.html"), "text/html"),
                Contract.route("HEAD", "/obj/page-4-1000/index.html?x=1"));
        assertInstanceOf(Contract.Health.class, Contract.route("GET", "/healthz"));
        assertInstanceOf(Contract.MethodNotAllowed.class, Contract.route("POST", "/obj/1000"));
        for (String bad : List.of("/", "/obj/", "/obj/page-4-1000/", "/etc/passwd", "/obj/../pki/x", "/obj/a/./b",
                "/objx", "/obj/%2e%2e/x", "obj/1000")) {
            assertInstanceOf(Contract.NotFound.class, Contract.route("GET", bad), bad);
        }
    }

    @Test
    void aFileRouteNeverLeavesObj() {
        Random random = new Random(33);
        String alphabet = "/a0.%?\\-";
        for (int i = 0; i < 20_000; i++) {
            StringBuilder p = new StringBuilder();
            for (int n = random.nextInt(30); n > 0; n--) {
                p.append(alphabet.charAt(random.nextInt(alphabet.length())));
            }
            if (Contract.route("GET", p.toString()) instanceof Contract.FileRoute f) {
                Path rel = f.rel();
                assertEquals(Path.of("obj"), rel.getName(0), p.toString());
                assertTrue(rel.getNameCount() >= 2, p.toString());
                assertEquals(rel, rel.normalize(), p.toString());
            }
        }
    }

    @Test
    void theAdaptersEnvironment() throws Contract.Refused {
        Contract.FetchArgs a = parse(Map.of("PROTOCOL", "h3",
                "URL", "https://kwik.quiclab/obj/1000 https://kwik.quiclab/obj/2000", "TIMEOUT", "30",
                "HOST_ADDR", "10.71.2.19"));
        assertEquals(2, a.targets().size());
        assertEquals("kwik.quiclab", a.targets().get(0).host());
        assertEquals(443, a.targets().get(0).port());
        assertEquals("/obj/2000", a.targets().get(1).path());
        assertEquals(30.0, a.timeoutS());
        assertEquals("10.71.2.19", a.hostAddr().orElseThrow().getHostAddress());
        Contract.FetchArgs plain = parse(Map.of("URL", "https://x.quiclab:4433/obj/1"));
        assertEquals(60.0, plain.timeoutS());
        assertEquals(4433, plain.targets().get(0).port());
        assertTrue(plain.hostAddr().isEmpty());
    }

    @Test
    void whatIsRefused() {
        assertEquals(127, assertThrows(Contract.Refused.class,
                () -> parse(Map.of("PROTOCOL", "h2", "URL", "https://a/obj/1"))).exitCode);
        List<Map<String, String>> bad = List.of(Map.of(), Map.of("URL", "  "), Map.of("URL", "http://a/obj/1"),
                Map.of("URL", "https://a/1 https://b/1"), Map.of("URL", "https://a/1", "TIMEOUT", "-1"),
                Map.of("URL", "https://a/1", "TIMEOUT", "x"), Map.of("URL", "https://a/1", "HOST_ADDR", "host"),
                Map.of("URL", "https://a/1", "HOST_ADDR", "300.1.1.1"), Map.of("URL", "https://a/1", "CC", "bbr"));
        for (Map<String, String> env : bad) {
            Contract.Refused e = assertThrows(Contract.Refused.class, () -> parse(env), env.toString());
            assertEquals(2, e.exitCode, env.toString());
            assertFalse(e.getMessage().contains("\n"));
        }
    }

    private static Contract.Transfer transfer(int i, int size, int status) {
        Contract.BodyDigest d = new Contract.BodyDigest();
        d.update(new byte[size], 0, size);
        return new Contract.Transfer("https://a/obj/" + i, status, d.size(), d.hex(), 1.0, 0.5);
    }

    @Test
    void theJsonHasTheFieldsTheLabReads() {
        String l = Contract.line(1, List.of(transfer(0, 3, 200)), new Contract.Timings(0.1, 0.2, 0.3),
                Contract.Outcome.OK, 0L);
        assertTrue(l.startsWith("{\"exit\":0,\"sha256\":\"709e80c88487a2411e1ee4dfb9f22a861492d20c4765150c0c794abd70f8147c\""), l);
        assertTrue(l.contains("\"http_version\":\"3\",\"response_code\":200,\"size_download\":3,\"time_total\":0.3,"
                + "\"time_appconnect\":0.1,\"time_starttransfer\":0.2,\"errormsg\":\"\",\"cc\":\"newreno\""), l);
        assertTrue(l.endsWith("\"udp_rcvbuf_errors\":0}"), l);
    }

    @Test
    void shortOrNon200IsAFailureAndNeverH3() {
        Contract.Timings t = new Contract.Timings(null, null, 1e-7);
        String shortLine = Contract.line(2, List.of(transfer(0, 3, 200)), t, Contract.Outcome.OK, null);
        assertTrue(shortLine.startsWith("{\"exit\":1,") && shortLine.contains("\"http_version\":\"\"")
                && shortLine.contains("\"errormsg\":\"1 of 2 objects fetched\"") && shortLine.contains("\"time_total\":0,")
                && shortLine.endsWith("\"udp_rcvbuf_errors\":null}"), shortLine);
        String missing = Contract.line(1, List.of(transfer(0, 9, 404)), t, Contract.Outcome.OK, null);
        assertTrue(missing.startsWith("{\"exit\":1,") && missing.contains("\"response_code\":404"), missing);
        String late = Contract.line(1, List.of(), t,
                new Contract.Outcome(Contract.Ending.TIMED_OUT, "timed out \"after\" 5 s"), null);
        assertTrue(late.startsWith("{\"exit\":28,\"sha256\":\"\"") && late.contains("\"errormsg\":\"timed out \\\"after\\\" 5 s\""),
                late);
    }

    @Test
    void nObjectsDigestIsTheDigestOfTheirDigests() {
        List<Contract.Transfer> ts = List.of(transfer(0, 1, 200), transfer(1, 2, 200), transfer(2, 3, 200));
        String joined = ts.get(0).sha256() + ts.get(1).sha256() + ts.get(2).sha256();
        Contract.BodyDigest d = new Contract.BodyDigest();
        byte[] b = joined.getBytes(StandardCharsets.US_ASCII);
        d.update(b, 0, b.length);
        assertEquals(d.hex(), Contract.combinedSha256(ts));
        assertEquals(ts.get(1).sha256(), Contract.combinedSha256(List.of(ts.get(1))));
        assertEquals("", Contract.combinedSha256(List.of()));
    }

    @Test
    void theVersionNamesEachLibrary() {
        String v = Contract.version();
        assertTrue(v.startsWith("kwik 0.10.9 (flupke 0.9.4, agent15 3.1; Java "), v);
    }
}
