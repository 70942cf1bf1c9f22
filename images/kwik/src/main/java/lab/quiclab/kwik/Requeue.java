package lab.quiclab.kwik;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.concurrent.atomic.AtomicInteger;
import tech.kwik.core.send.SenderImpl;
import tech.kwik.core.stream.RetransmitBuffer;
import tech.kwik.core.stream.SendBuffer;

/**
 * The server's repair of a send request kwik 0.10.9 loses (docs/implementations.md, "kwik"), for one response.
 *
 * <p>kwik's stream output (tech.kwik.core.stream.StreamOutputStreamImpl) keeps at most one send request queued and
 * counts it in {@code sendRequestsQueued}: {@code scheduleSendStreamFrameRequest} queues a request when the count is
 * 0, wakes the sender, and only then increments the count; the request ({@code sendStreamFrame}, on the sender's
 * thread) first decrements it and, when data is left after its frame, queues the next request only if the count is
 * 0. When the woken sender runs the request before the writing thread has incremented (the writer descheduled in
 * between: on a busy host the woken sender takes the writer's core), the sender sees -1 and queues nothing, the
 * writer's increment brings the count back to 0, and the stream holds data with no request queued. Nothing queues
 * one again until the handler writes or closes: never if its next write blocks on the full 50 KiB buffer, or if it
 * had closed. The response then stops for good (sender idle, every packet acknowledged, no timer armed).
 *
 * <p>After each write and after the close, {@link #check} finds that state (count 0, data or the end of the stream
 * still buffered, or lost frames waiting to be sent again) and queues the request kwik lost: through kwik's own scheduling without waking the sender (so the
 * count is incremented before the sender can run it), then wakes the sender. A request queued while the sender was
 * about to queue its own is one too many, which kwik allows (it sends nothing when nothing is buffered). The fields
 * and methods are kwik 0.10.9's (and flupke 0.9.4's DataFrameWriter's); they are looked up once, when the class is
 * loaded: a kwik or flupke whose internals differ fails the image's build (RequeueTest) and the server's start.
 */
final class Requeue {

    private static final Field FLUPKE_OUT = field("tech.kwik.flupke.server.impl.DataFrameWriter", "outputStream");
    private static final String KWIK_OUT = "tech.kwik.core.stream.StreamOutputStreamImpl";
    private static final Field QUEUED = field(KWIK_OUT, "sendRequestsQueued");
    private static final Field BUFFER = field(KWIK_OUT, "sendBuffer");
    private static final Field RETRANSMIT = field(KWIK_OUT, "retransmitBuffer");
    private static final Field STREAM = field(KWIK_OUT, "quicStream");
    private static final Field CONNECTION = field("tech.kwik.core.stream.QuicStreamImpl", "connection");
    private static final Method SENDER = method("tech.kwik.core.impl.QuicConnectionImpl", "getSender");
    private static final Method SCHEDULE = method(KWIK_OUT, "scheduleSendStreamFrameRequest", boolean.class);
    /** Requests queued again per check at most (one is enough; more only if the sender ran the last one at once). */
    static final int MAX_PER_CHECK = 3;

    private final Object kwikOut;
    private final AtomicInteger queued;
    private final SendBuffer buffer;
    private final RetransmitBuffer retransmit;
    private final SenderImpl sender;
    private int requeued;

    private Requeue(Object kwikOut) throws ReflectiveOperationException {
        this.kwikOut = kwikOut;
        this.queued = (AtomicInteger) QUEUED.get(kwikOut);
        this.buffer = (SendBuffer) BUFFER.get(kwikOut);
        this.retransmit = (RetransmitBuffer) RETRANSMIT.get(kwikOut);
        this.sender = (SenderImpl) SENDER.invoke(CONNECTION.get(STREAM.get(kwikOut)));
    }

    /** Loads the class: its look-ups fail here, when the server starts, not in a response. */
    static void resolve() {
        // the static initializers ran
    }

    /** For the output stream flupke's response gave (its DataFrameWriter around kwik's stream output). */
    static Requeue of(OutputStream responseOut) throws IOException {
        try {
            return new Requeue(FLUPKE_OUT.get(responseOut));
        } catch (ReflectiveOperationException | ClassCastException | IllegalArgumentException e) {
            throw new IOException("kwik's stream output not reachable from " + responseOut.getClass().getName(), e);
        }
    }

    /** Whether the stream holds data (or its end, or frames to retransmit) with no send request counted: kwik lost
     * it (its request sends both, and queues the next while either is left). */
    boolean lost() {
        return queued.get() == 0 && (buffered() || retransmit.hasDataToRetransmit());
    }

    /** Whether data (or the end of the stream) is still buffered, not yet taken by kwik's sender. */
    boolean buffered() {
        return buffer.hasData();
    }

    /** Queues the send request again if kwik lost it; call after each write and after the close. Returns how many
     * it queued (0: nothing was lost). */
    int check() throws IOException {
        int i = 0;
        for (; i < MAX_PER_CHECK && lost(); i++) {
            try {
                SCHEDULE.invoke(kwikOut, false);  // queued and counted, the sender not woken in between
            } catch (IllegalAccessException | InvocationTargetException e) {
                throw new IOException("kwik's send request could not be queued again", e);
            }
            sender.flush();  // now wake it
            requeued++;
        }
        return i;
    }

    /** How many send requests this response's checks queued again. */
    int requeued() {
        return requeued;
    }

    /** The count kwik keeps (tests force the lost state with it). */
    AtomicInteger queuedCount() {
        return queued;
    }

    private static Field field(String type, String name) {
        try {
            Field f = Class.forName(type).getDeclaredField(name);
            f.setAccessible(true);
            return f;
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new ExceptionInInitializerError("quiclab-kwik: " + type + "." + name + " not found (a kwik or flupke "
                    + "other than 0.10.9 / 0.9.4?): " + e);
        }
    }

    private static Method method(String type, String name, Class<?>... params) {
        try {
            Method m = Class.forName(type).getDeclaredMethod(name, params);
            m.setAccessible(true);
            return m;
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new ExceptionInInitializerError("quiclab-kwik: " + type + "." + name + "() not found (a kwik other "
                    + "than 0.10.9?): " + e);
        }
    }
}
