/*
 * icelake_assets: the scan reporter (docs/layout.md, "Collecting scan reports").
 *
 * An Iceberg MetricsReporter that an engine loads by catalog configuration
 * (metrics-reporter-impl=io.icelake.reports.IcelakeScanReportWriter): each ScanReport of a planned
 * scan is written as ScanReportParser JSON to <icelake.scan-reports-dir>/<yyyyMMdd>/<uuid>.json,
 * where the product's sensor ingests it (icelake_assets/audit/scan_reports.py). Built from this
 * source by scripts/bootstrap.sh (icelake_assets/maintenance/spark/reporter_jar.py).
 */
package io.icelake.reports;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Map;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFileSystem;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.iceberg.metrics.MetricsReport;
import org.apache.iceberg.metrics.MetricsReporter;
import org.apache.iceberg.metrics.ScanReport;
import org.apache.iceberg.metrics.ScanReportParser;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class IcelakeScanReportWriter implements MetricsReporter {
  public static final String DIR_PROPERTY = "icelake.scan-reports-dir";
  private static final String HADOOP_PREFIX = "hadoop.";
  private static final Logger LOG = LoggerFactory.getLogger(IcelakeScanReportWriter.class);
  private static final DateTimeFormatter DAY =
      DateTimeFormatter.ofPattern("yyyyMMdd").withZone(ZoneOffset.UTC);

  private Path dir;
  private Configuration conf;

  /** Iceberg calls this once per catalog with the catalog's properties. */
  @Override
  public void initialize(Map<String, String> properties) {
    String location = properties.get(DIR_PROPERTY);
    if (location == null || location.trim().isEmpty()) {
      LOG.warn("{} is not set: scan reports are dropped", DIR_PROPERTY);
      return;
    }
    Configuration base = engineConf();
    // The catalog's own hadoop.* options (per-catalog S3A endpoint and credentials) win, as they
    // do for the catalog's HadoopFileIO.
    for (Map.Entry<String, String> e : properties.entrySet()) {
      if (e.getKey().startsWith(HADOOP_PREFIX)) {
        base.set(e.getKey().substring(HADOOP_PREFIX.length()), e.getValue());
      }
    }
    this.conf = base;
    this.dir = new Path(location.trim());
  }

  /** Never throws into the query: a report that cannot be written is logged and dropped. */
  @Override
  public void report(MetricsReport report) {
    if (!(report instanceof ScanReport) || dir == null) {
      return; // commit reports are not collected
    }
    try {
      write(ScanReportParser.toJson((ScanReport) report));
    } catch (Exception | LinkageError e) {
      LOG.warn("scan report of {} not written to {}: {}", ((ScanReport) report).tableName(), dir, e.toString());
    }
  }

  private void write(String json) throws IOException {
    Path day = new Path(dir, DAY.format(Instant.now()));
    String name = UUID.randomUUID() + ".json";
    FileSystem fs = day.getFileSystem(conf);
    if (fs instanceof ChecksumFileSystem) {
      // The local file system would leave a hidden .crc beside each report, never ingested or removed.
      fs = ((ChecksumFileSystem) fs).getRawFileSystem();
    }
    // Hidden while written, then renamed: a reader lists only complete *.json files.
    Path partial = new Path(day, "." + name + ".tmp");
    try (FSDataOutputStream out = fs.create(partial, false)) {
      out.write(json.getBytes(StandardCharsets.UTF_8));
    }
    if (!fs.rename(partial, new Path(day, name))) {
      fs.delete(partial, false);
      throw new IOException("rename of " + partial + " failed");
    }
  }

  /**
   * The engine's Hadoop configuration: in Spark, the session's (spark.hadoop.* options included,
   * e.g. the S3A settings the product puts there); elsewhere Hadoop's defaults (core-site.xml).
   */
  private static Configuration engineConf() {
    try {
      return SparkHadoopConf.get();
    } catch (RuntimeException | LinkageError e) {
      return new Configuration();
    }
  }

  /** Apart, so that an engine without Spark on its class path only fails here, caught above. */
  private static final class SparkHadoopConf {
    static Configuration get() {
      return org.apache.spark.sql.SparkSession.active().sessionState().newHadoopConf();
    }
  }
}
